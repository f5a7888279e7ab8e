// The source refuses to start on a training split of another size than the
// one its run was planned for: a stage's learning-rate schedule counts its
// steps from that number (actors/modes/schedule_length.hpp), so a node
// reading other data would otherwise step along a schedule of another
// run's length without a word.

#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <gtest/gtest.h>

#include "actors/net/system.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "tests/support/text.hpp"

using namespace baton;
using baton::testing::contains;

namespace {

actors::source_settings synthetic(int64_t samples) {
  actors::source_settings spec;
  spec.data.kind = "synthetic";
  spec.data.shape = {1, 8, 8};
  spec.data.synthetic_train = samples;
  spec.data.synthetic_test = 16;
  return spec;
}

} // namespace

TEST(source, refuses_a_training_split_of_another_size_than_planned) {
  caf::actor_system_config cfg;
  actors::configure(cfg, {});
  caf::actor_system sys{cfg};
  auto spec = synthetic(64);
  spec.train_samples = 60;
  auto refused = actors::spawn_source(sys, "source", "n1", spec);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), errc::bad_config);
  const auto text = sys.render(refused.error());
  EXPECT_TRUE(contains(text, "the training split has 64 samples here, but the run was planned "
                             "for 60"))
    << text;
  for (int64_t planned : {0, 64}) { // not checked, or the same number
    spec.train_samples = planned;
    auto started = actors::spawn_source(sys, "source", "n1", spec);
    ASSERT_TRUE(started) << sys.render(started.error());
    caf::anon_send_exit(*started, caf::exit_reason::kill);
  }
}
