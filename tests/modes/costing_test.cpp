// The cost model's view of each strategy (actors/modes/costing.hpp and each
// mode's cost.cpp): a variant's settings as a cost::strategy, its model's
// layers scaled to its step timed whole, its projection to other host
// counts, with the profiles and timings given by a fake cost_profiles, so
// that what each mode makes of its section is checked without timing
// anything. `baton predict` with real profiles: tests/apps/predict_test.cpp.

#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::actors;
using baton::describe;
using baton::testing::small_job_topology;
using baton::testing::small_transfer_end;
namespace cost_model = baton::model::cost;

namespace {

/// Three layers of 3.5 ms a microbatch (1 forward, 2 backward, 0.5 the
/// update), a step timed whole of 21 ms, IST's round's six figures and the
/// local loop's one; what each mode asked is kept.
class fixed_profiles : public cost_profiles {
public:
  struct asked {
    int64_t batch;
    int32_t threads;
    int32_t copies;
  };

  caf::expected<baton::model::model_profile> of(const baton::actors::topology& t, int64_t batch,
                                                int32_t threads, int32_t copies) override {
    profiled.push_back({batch, threads, copies});
    baton::model::model_profile p;
    p.model = trained_model_of(t).spec.name;
    p.microbatch_size = batch;
    for (const char* name : {"fc1", "relu1", "fc2"})
      p.layers.push_back({name, 0.001, 0.002, 1000, 4000, 0.0005});
    return p;
  }
  caf::expected<double> whole_step_of(const baton::actors::topology&, int64_t, int32_t) override {
    return 0.021;
  }
  caf::expected<std::vector<double>> timed(
    const std::string& key, std::function<caf::expected<std::vector<double>>()>) override {
    keys.push_back(key);
    if (key.rfind("ist/", 0) == 0)
      return std::vector<double>{0.004, 0.001, 0.002, 0.0001, 0.0003, 0.0002};
    return std::vector<double>{0.007};
  }
  bool from_file() const override { return false; }

  std::vector<asked> profiled;
  std::vector<std::string> keys;
};

baton::actors::topology costing_topology(const std::string& text) {
  auto t = parse_topology(text, "costing.yaml", {});
  if (!t) {
    ADD_FAILURE() << describe(t.error());
    return {};
  }
  return *t;
}

baton::actors::topology data_parallel_topology(const std::string& keys) {
  return costing_topology(small_job_topology("data-parallel", "data_parallel",
                                             "{checkpoint: none}") +
                          "  workers: 2\n  model: mlp\n" + keys);
}

} // namespace

TEST(costing, the_ring_is_its_workers_with_the_layers_scaled_to_the_step_timed_whole) {
  fixed_profiles profiles;
  auto c = cost_of({"data-parallel:ring", data_parallel_topology(""), 2, 0, 2}, profiles);
  ASSERT_TRUE(c) << describe(c.error());
  EXPECT_EQ(c->model, "mlp");
  EXPECT_EQ(c->hosts, 2);
  ASSERT_NE(std::get_if<cost_model::ring_strategy>(&c->strategy), nullptr);
  // Each worker on one thread, as many profiled side by side as asked.
  ASSERT_EQ(profiles.profiled.size(), 1u);
  EXPECT_EQ(profiles.profiled[0].batch, 16);
  EXPECT_EQ(profiles.profiled[0].threads, 1);
  EXPECT_EQ(profiles.profiled[0].copies, 2);
  // 10.5 ms of layers scaled to the 21 ms step: their split kept.
  EXPECT_DOUBLE_EQ(c->timed_step_seconds, 0.021);
  EXPECT_NEAR(c->load.layers.at(0).forward_seconds, 0.002, 1e-12);
  EXPECT_NEAR(c->load.layers.at(2).update_seconds, 0.001, 1e-12);
}

TEST(costing, shards_one_per_host_follow_the_hosts_in_the_projection) {
  fixed_profiles profiles;
  auto c = cost_of({"data-parallel:ps", data_parallel_topology("  exchange: ps\n  shards: 2\n"),
                    2, 0, 2},
                   profiles);
  ASSERT_TRUE(c) << describe(c.error());
  const auto* ps = std::get_if<cost_model::ps_strategy>(&c->strategy);
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->shards, 2);
  const auto* projected = std::get_if<cost_model::ps_strategy>(&c->projected);
  ASSERT_NE(projected, nullptr);
  EXPECT_EQ(projected->shards, 0); // W at every W
}

TEST(costing, local_is_one_process_on_its_lanes_with_its_loop_timed_whole) {
  fixed_profiles profiles;
  auto c = cost_of({"local", data_parallel_topology(""), 2, 0, 1}, profiles);
  ASSERT_TRUE(c) << describe(c.error());
  const auto* local = std::get_if<cost_model::local_strategy>(&c->strategy);
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->workers, 2);
  EXPECT_GE(local->lanes, 1);
  EXPECT_DOUBLE_EQ(local->loop_step_seconds, 0.007);
  EXPECT_EQ(c->hosts, 1);
  EXPECT_EQ(c->timed_step_seconds, 0); // the loop is timed, not the layers scaled
  ASSERT_EQ(profiles.keys.size(), 1u);
  EXPECT_EQ(profiles.keys[0].rfind("local/mlp/", 0), 0u) << profiles.keys[0];
}

TEST(costing, ist_takes_its_round_as_its_roles_run_it_and_refuses_resist) {
  fixed_profiles profiles;
  const std::string head = small_job_topology("ist", "ist", "{checkpoint: none}");
  auto c = cost_of({"ist", costing_topology(head + "  workers: 2\n  hidden: [32]\n"), 2, 0, 2},
                   profiles);
  ASSERT_TRUE(c) << describe(c.error());
  EXPECT_EQ(c->model, "ist_mlp");
  const auto* ist = std::get_if<cost_model::ist_strategy>(&c->strategy);
  ASSERT_NE(ist, nullptr);
  EXPECT_EQ(ist->shards, 2);
  EXPECT_EQ(ist->mlp_hidden, (std::vector<int64_t>{32}));
  EXPECT_EQ(ist->mlp_classes, 10);
  EXPECT_DOUBLE_EQ(ist->subnet_step_seconds, 0.004);
  EXPECT_DOUBLE_EQ(ist->round.assemble, 0.001);
  EXPECT_DOUBLE_EQ(ist->round.put, 0.0002);
  EXPECT_EQ(ist->timed_shards, 2);
  EXPECT_EQ(c->timed_step_seconds, 0); // its subnet's step is timed instead
  auto resist = cost_of({"ist", costing_topology(head + "  kind: resist\n"), 2, 0, 2}, profiles);
  ASSERT_FALSE(resist);
  EXPECT_NE(describe(resist.error()).find("ist.kind 'resist' is not modelled"),
            std::string::npos)
    << describe(resist.error());
}

TEST(costing, a_pipeline_s_given_stages_are_its_hosts_and_a_projection_plans_again) {
  fixed_profiles profiles;
  auto t = costing_topology(
    small_job_topology("pipeline", "pipeline", "{model: convnet, checkpoint: none}",
                       "{dataset: synthetic, synthetic_train: 192, synthetic_test: 64,\n"
                       "       batch_size: 16, microbatches: 4, epochs: 1}") +
    "  schedule: gpipe\n  stages: [{last_layer: conv3}, {last_layer: fc2}]\n");
  auto c = cost_of({"pipeline:gpipe", t, 2, 0, 2}, profiles);
  ASSERT_TRUE(c) << describe(c.error());
  const auto* p = std::get_if<cost_model::pipeline_strategy>(&c->strategy);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->schedule, cost_model::pipeline_schedule::gpipe);
  EXPECT_EQ(p->microbatches, 4);
  EXPECT_EQ(p->stage_ends.size(), 2u);
  EXPECT_EQ(c->hosts, 2);
  ASSERT_EQ(profiles.profiled.size(), 1u);
  EXPECT_EQ(profiles.profiled[0].batch, 4); // a microbatch
  const auto* projected = std::get_if<cost_model::pipeline_strategy>(&c->projected);
  ASSERT_NE(projected, nullptr);
  EXPECT_TRUE(projected->stage_ends.empty());
}

TEST(costing, a_job_without_a_cost_model_is_refused_naming_those_with_one) {
  fixed_profiles profiles;
  auto t = costing_topology(std::string{"job: transfer\nseed: 7\ndata: "} +
                            baton::testing::small_synthetic_data + "\n" + small_transfer_end);
  auto c = cost_of({"transfer", t, 2, 0, 1}, profiles);
  ASSERT_FALSE(c);
  EXPECT_NE(describe(c.error())
              .find("job: transfer has no cost model (data-parallel, pipeline, ist have one)"),
            std::string::npos)
    << describe(c.error());
  EXPECT_TRUE(profiles.profiled.empty());
}
