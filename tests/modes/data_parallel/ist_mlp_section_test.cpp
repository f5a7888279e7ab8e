// job: data-parallel with `data_parallel.model: ist_mlp` (IST's network as a
// layered_model) and `data_parallel.hidden`: the section's refusals with
// file:line, the widths reaching the workers, their initial network equal to
// job: ist's make_ist_network, and model_spec's codec reading settings
// written before `hidden` existed.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/config/role_spec_yaml.hpp"
#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/data_parallel_worker.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/ist/ist_network.hpp"
#include "model/core/layered_model.hpp"

using namespace baton::actors;

namespace {

/// A small data-parallel topology (synthetic 28x28 data) of `model` with
/// `section` as the rest of its `data_parallel:` section; line 13 is the
/// section's first key after `model`.
std::string topology_text(const std::string& section, const std::string& model) {
  return "# an ist_mlp test topology\n"
         "job: data-parallel\n"
         "seed: 7\n"
         "data: {dataset: synthetic, synthetic_train: 192, synthetic_test: 64,\n"
         "       batch_size: 16, epochs: 1}\n"
         "backbone: {model: convnet, checkpoint: none,\n"
         "           pretrain: {task: all10, optimizer: {lr: 0.05, momentum: 0.9}}}\n"
         "tasks:\n"
         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
         "heads: [{name: all10, task: all10}]\n"
         "data_parallel:\n"
         "  model: " + model + "\n" +
         section;
}

caf::expected<topology> parse(const std::string& section, const std::string& model = "ist_mlp") {
  return parse_topology(topology_text(section, model), "dp.yaml", {});
}

/// The error text of a topology that must be refused.
std::string refusal(const std::string& section, const std::string& model = "ist_mlp") {
  auto t = parse(section, model);
  if (t) {
    ADD_FAILURE() << "accepted:\n" << section;
    return "";
  }
  return baton::describe(t.error());
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Worker 1's settings of the plan of `section` (W = 2), through its codec.
data_parallel_worker_spec planned_worker(const std::string& section) {
  auto t = parse("  workers: 2\n" + section);
  if (!t) {
    ADD_FAILURE() << baton::describe(t.error());
    return {};
  }
  auto plan = plan_of(*t);
  if (!plan || plan->actors.size() != 2u) {
    ADD_FAILURE() << (plan ? "not 2 workers" : baton::describe(plan.error()));
    return {};
  }
  auto spec = parse_data_parallel_worker_spec(plan->actors[1].settings);
  if (!spec) {
    ADD_FAILURE() << baton::describe(spec.error());
    return {};
  }
  EXPECT_EQ(to_yaml(*spec), plan->actors[1].settings);
  return *spec;
}

} // namespace

TEST(ist_mlp_section, bad_hidden_widths_are_refused_with_file_and_line) {
  for (const char* bad : {"  hidden: [64, 0]\n", "  hidden: [-3]\n", "  hidden: []\n",
                          "  hidden: 64\n", "  hidden: [wide]\n", "  hidden: [70000]\n",
                          "  hidden: {a: 1}\n"}) {
    auto text = refusal(bad);
    EXPECT_TRUE(has(text, "dp.yaml:13")) << bad << " -> " << text;
    EXPECT_TRUE(has(text, "hidden")) << bad << " -> " << text;
  }
}

TEST(ist_mlp_section, hidden_is_read_with_ist_mlp_only) {
  for (const char* model : {"mlp", "convnet"}) {
    auto text = refusal("  hidden: [64]\n", model);
    EXPECT_TRUE(has(text, "dp.yaml:13")) << text;
    EXPECT_TRUE(has(text, "ist_mlp only")) << text;
  }
}

TEST(ist_mlp_section, an_unknown_model_names_ist_mlp_among_the_choices) {
  auto text = refusal("", "ist_mpl");
  EXPECT_TRUE(has(text, "dp.yaml:12")) << text;
  EXPECT_TRUE(has(text, "ist_mlp")) << text;
}

TEST(ist_mlp_section, the_workers_get_the_widths_and_ists_initial_network) {
  auto spec = planned_worker("  hidden: [24, 40]\n");
  EXPECT_EQ(spec.model.name, "ist_mlp");
  EXPECT_EQ(spec.model.hidden, (std::vector<int64_t>{24, 40}));
  const auto m = make_data_parallel_model(spec.model);
  baton::model::ist_shape shape;
  shape.hidden = {24, 40};
  shape.classes = spec.model.classes;
  EXPECT_EQ(baton::model::weights_digest(m),
            baton::model::ist_digest(baton::model::make_ist_network(shape, spec.model.seed)));
  EXPECT_EQ(m.layer_names().back(), "norm");
  // Absent: one hidden layer of 4096, the default of model_spec and of ist.hidden.
  EXPECT_EQ(planned_worker("").model.hidden, std::vector<int64_t>{4096});
}

TEST(ist_mlp_section, model_settings_without_hidden_still_parse) {
  baton::model::model_spec spec;
  spec.name = "mlp";
  spec.hidden = {8, 8};
  auto node = encode(spec);
  EXPECT_EQ(decode_model(node).hidden, (std::vector<int64_t>{8, 8}));
  node.remove("hidden");
  EXPECT_EQ(decode_model(node).hidden, std::vector<int64_t>{4096});
}
