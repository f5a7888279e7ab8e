// The credit window across processes: a stage on a real `baton node` process
// sends a slow receiver (this test) at most W microbatches before a credit
// comes back, however many inputs it holds.

#include <deque>

#include <ATen/ATen.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include "actors/modes/transfer/stage_settings.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/net/system.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton;
using namespace std::chrono_literals;

namespace {

constexpr int32_t window = 3;
constexpr int inputs = 4 * window;

messages::microbatch make_input(int64_t id) {
  messages::microbatch m;
  m.id = id;
  m.payload = at::zeros({2, 1, 28, 28});
  m.labels.push_back({"all10", at::zeros({2}, at::kLong)});
  return m;
}

/// Counts microbatches arriving within `wait` without returning credits;
/// appends their ids to `uncredited`.
int drain(caf::scoped_actor& self, std::chrono::milliseconds wait,
          std::deque<int64_t>& uncredited) {
  int received = 0;
  bool quiet = false;
  while (!quiet)
    self->receive([&](const messages::microbatch& m) {
                    ++received;
                    uncredited.push_back(m.id);
                  },
                  [&](const messages::credit&) {}, // the stage crediting us as its source
                  caf::after(wait) >> [&] { quiet = true; });
  return received;
}

} // namespace

TEST(backpressure, stage_on_a_node_never_exceeds_its_window) {
  baton::testing::scratch_dir dir{"backpressure"};
  baton::testing::node_process node{dir.path(), "n1"};
  auto port = node.port();
  ASSERT_NE(port, 0) << node.log();

  caf::actor_system_config cfg;
  actors::configure(cfg, {});
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto spawner = sys.middleman().remote_actor("127.0.0.1", port);
  ASSERT_TRUE(spawner) << sys.render(spawner.error());

  actors::transfer::stage_settings spec;
  spec.backbone.name = "convnet";
  spec.begin = 0;
  spec.end = 5;
  spec.window = window;
  caf::actor stage;
  self->request(*spawner, 10s, messages::spawn_request{"stage", "stage0", to_yaml(spec), {}})
    .receive([&](caf::actor& a) { stage = a; },
             [&](caf::error& err) { FAIL() << sys.render(err); });
  ASSERT_TRUE(stage);
  auto me = caf::actor_cast<caf::actor>(self);
  self->request(stage, 10s, actors::observe_atom::value, me).receive([](caf::ok_atom) {}, [](caf::error&) {});
  self->request(stage, 10s, actors::connect_atom::value, me, std::string{"receiver"})
    .receive([](caf::ok_atom) {}, [&](caf::error& err) { FAIL() << sys.render(err); });

  for (int i = 0; i < inputs; ++i)
    self->send(stage, make_input(i));
  // A credit names the microbatch it returns, as a receiver sends it.
  std::deque<int64_t> uncredited;
  auto credit_oldest = [&] {
    ASSERT_FALSE(uncredited.empty());
    self->send(stage, messages::credit{uncredited.front(), 1, {}});
    uncredited.pop_front();
  };
  // Without credits back, exactly one window's worth arrives.
  EXPECT_EQ(drain(self, 1500ms, uncredited), window);
  // Each credit releases exactly one more.
  for (int i = 0; i < 3; ++i) {
    credit_oldest();
    EXPECT_EQ(drain(self, 1000ms, uncredited), 1);
  }
  // A window's worth of credits releases a window's worth.
  for (int i = 0; i < window; ++i)
    credit_oldest();
  EXPECT_EQ(drain(self, 1500ms, uncredited), window);
  self->send_exit(stage, caf::exit_reason::user_shutdown);
  node.stop();
}

// A message from another node goes from the socket's reader to its actor's
// mailbox without a BASP worker between them (net/system.cpp): one thread
// fewer to wake per message, which a pipeline's activations wait for.
TEST(backpressure, a_node_delivers_remote_messages_from_the_thread_that_reads_them) {
  caf::actor_system_config cfg;
  actors::configure(cfg, {});
  EXPECT_EQ(caf::get_or(cfg, "middleman.workers", size_t{1}), size_t{0});
}
