// job: data-parallel with `data_parallel.model: ist_mlp` (IST's network as a
// layered_model) and `data_parallel.hidden`: the section's refusals with
// file:line, the widths reaching the workers, their initial network equal to
// job: ist's ist::make_network, and model_spec's codec reading settings
// written before `hidden` existed.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/config/model_fields.hpp"
#include "actors/config/topology.hpp"
#include "actors/config/yaml_codec.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/worker_layers.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/core/freezing.hpp"
#include "model/ist_mlp/network.hpp"
#include "model/core/layered_model.hpp"
#include "tests/modes/data_parallel/small_job.hpp"
#include "tests/support/text.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::actors;
using namespace baton::testing;

namespace {

/// The small data-parallel job of `model`: `data_parallel.model` on line
/// 12, the section's other keys from line 13.
topology_fixture mlp_dp(const std::string& model = "ist_mlp") {
  return data_parallel_topology("dp.yaml", model);
}

/// Worker 1's settings of the plan of `section` (W = 2), through its codec.
data_parallel::worker_settings mlp_planned_worker(const std::string& section) {
  return last_planned_worker(mlp_dp(), "  workers: 2\n" + section, 2);
}

} // namespace

TEST(ist_mlp_section, bad_hidden_widths_are_refused_with_file_and_line) {
  for (const char* bad : {"  hidden: [64, 0]\n", "  hidden: [-3]\n", "  hidden: []\n",
                          "  hidden: 64\n", "  hidden: [wide]\n", "  hidden: [70000]\n",
                          "  hidden: {a: 1}\n"}) {
    auto text = mlp_dp().refusal(bad);
    EXPECT_TRUE(contains(text, "dp.yaml:13")) << bad << " -> " << text;
    EXPECT_TRUE(contains(text, "hidden")) << bad << " -> " << text;
  }
}

TEST(ist_mlp_section, hidden_is_read_with_ist_mlp_only) {
  for (const char* model : {"mlp", "convnet"}) {
    auto text = mlp_dp(model).refusal("  hidden: [64]\n");
    EXPECT_TRUE(contains(text, "dp.yaml:13")) << text;
    EXPECT_TRUE(contains(text, "ist_mlp only")) << text;
  }
}

TEST(ist_mlp_section, an_unknown_model_names_ist_mlp_among_the_choices) {
  auto text = mlp_dp("ist_mpl").refusal("");
  EXPECT_TRUE(contains(text, "dp.yaml:12")) << text;
  EXPECT_TRUE(contains(text, "ist_mlp")) << text;
}

TEST(ist_mlp_section, the_workers_get_the_widths_and_ists_initial_network) {
  auto spec = mlp_planned_worker("  hidden: [24, 40]\n");
  EXPECT_EQ(spec.model.name, "ist_mlp");
  EXPECT_EQ(spec.model.hidden, (std::vector<int64_t>{24, 40}));
  const auto m = data_parallel::make_worker_model(spec.model);
  baton::model::ist::shape shape;
  shape.hidden = {24, 40};
  shape.classes = spec.model.classes;
  EXPECT_EQ(baton::model::weights_digest(m),
            baton::model::ist::digest(baton::model::ist::make_network(shape, spec.model.seed)));
  EXPECT_EQ(m.layer_names().back(), "norm");
  // Absent: one hidden layer of 4096, the default of model_spec and of ist.hidden.
  EXPECT_EQ(mlp_planned_worker("").model.hidden, std::vector<int64_t>{4096});
}

// The freeze section reads a worker's layers without building its model:
// the same names and batch norms as the model make_worker_model builds.
TEST(ist_mlp_section, a_worker_s_layers_are_listed_as_built) {
  for (const char* name : {"ist_mlp", "mlp", "convnet", "resnet18"}) {
    baton::model::model_spec spec;
    spec.name = name;
    spec.classes = 7;
    spec.hidden = {24, 40};
    if (spec.name == "resnet18") {
      spec.in_channels = 3;
      spec.in_height = spec.in_width = 32;
    }
    const auto m = data_parallel::make_worker_model(spec);
    const auto listed = data_parallel::list_worker_layers(spec);
    EXPECT_EQ(listed.names, m.layer_names()) << name;
    EXPECT_EQ(listed.batch_dependent, baton::model::batch_dependent_layers(m)) << name;
  }
}

TEST(ist_mlp_section, model_settings_without_hidden_still_parse) {
  baton::model::model_spec spec;
  spec.name = "mlp";
  spec.hidden = {8, 8};
  auto node = to_node(spec);
  EXPECT_EQ(from_node<baton::model::model_spec>(node, "model").hidden,
            (std::vector<int64_t>{8, 8}));
  node.remove("hidden");
  EXPECT_EQ(from_node<baton::model::model_spec>(node, "model").hidden,
            std::vector<int64_t>{4096});
}
