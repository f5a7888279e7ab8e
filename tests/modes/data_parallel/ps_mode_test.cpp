// job: data-parallel with exchange: ps (issue 11): parameter shard actors,
// BSP and bounded staleness. The plain-data exchange (split, push, sum,
// step, pull, assemble) against the reference arithmetic, the section's
// keys and errors, the plan as data, and real runs (embedded, node
// processes) against --mode local (summation::worker_order), digest for
// digest, with the bytes of every edge against the theory.

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/plan.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/ps_exchange.hpp"
#include "actors/modes/data_parallel/shard.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/error.hpp"
#include "model/core/stage_trainer.hpp"
#include "tests/modes/data_parallel/small_job.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/settings_codec.hpp"
#include "tests/support/tiny_model.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::actors;
using namespace baton::actors::data_parallel;
using namespace baton::testing;
namespace model = baton::model;

// -- the plain-data exchange ------------------------------------------------------------

TEST(ps_exchange, parts_cover_the_trainable_keys_and_frozen_shards_are_idle) {
  const auto m = model::testing::tiny_model(); // fc1 25120, fc2 792, fc3 250 elements
  const auto layout = model::make_flat_layout(m);
  const auto parts = shard_parts(layout, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], (model::key_range{0, 8721}));
  EXPECT_EQ(parts[2].end, layout.numel);
  EXPECT_EQ(parts[1].begin, parts[0].end);
  // fc1 (flatten's next layer) spans all three shards.
  EXPECT_EQ(model::keys_in(parts[1], layout).size(), 1u);
  // flatten and fc1 frozen: the first two ranges hold only frozen keys.
  const auto frozen = model::make_flat_layout(m, 2);
  ps_exchange ps(frozen, 3);
  EXPECT_TRUE(ps.idle(0));
  EXPECT_TRUE(ps.idle(1));
  EXPECT_EQ(ps.part(2), (model::key_range{frozen.frozen_numel, frozen.numel}));
  std::vector<at::Tensor> grads;
  for (const auto& p : m.parameters())
    grads.push_back(torch::ones_like(p));
  auto slices = ps.split(grads);
  EXPECT_FALSE(slices[0].defined());
  EXPECT_EQ(slices[2].numel(), frozen.numel - frozen.frozen_numel);
  EXPECT_THROW(ps.receive(0, 0, torch::zeros({0})), model::error);
}

TEST(ps_exchange, write_range_crosses_key_boundaries) {
  const auto m = model::testing::tiny_model();
  const auto layout = model::make_flat_layout(m);
  std::vector<at::Tensor> params;
  for (const auto& p : m.parameters())
    params.push_back(torch::zeros_like(p));
  const auto flat = torch::arange(layout.numel, torch::kFloat32);
  const model::key_range range{25100, 25200}; // fc1's bias end, fc2's weight start
  write_range(params, layout, range, model::slice(flat, range));
  auto written = model::flatten(params, layout);
  EXPECT_TRUE(torch::equal(model::slice(written, range), model::slice(flat, range)));
  EXPECT_EQ(written.sum().item<double>(), model::slice(flat, range).sum().item<double>());
}

TEST(ps_exchange, refuses_wrong_slices) {
  const auto layout = model::make_flat_layout(model::testing::tiny_model());
  ps_exchange ps(layout, 2);
  const auto size = ps.part(1).size();
  EXPECT_THROW(ps.receive(2, 0, torch::zeros({size})), model::error);
  EXPECT_THROW(ps.receive(1, 0, torch::zeros({size + 1})), model::error);
  EXPECT_THROW(ps.receive(1, 0, torch::zeros({size}, torch::kInt64)), model::error);
  ps.receive(1, 0, torch::zeros({size}));
  EXPECT_THROW(ps.receive(1, 0, torch::zeros({size})), model::error); // twice
  EXPECT_FALSE(ps.complete());
  std::vector<at::Tensor> params = model::unflatten(torch::zeros({layout.numel}), layout);
  EXPECT_THROW(ps.apply(params), model::error);
  ps.receive(0, 0, torch::zeros({ps.part(0).size()}));
  EXPECT_TRUE(ps.complete());
  ps.apply(params);
  EXPECT_EQ(ps.applied(), 1);
  EXPECT_THROW(ps.receive(0, 0, torch::zeros({ps.part(0).size()})), model::error); // applied
  shard_optimizer shard(ps.part(0), torch::zeros({ps.part(0).size()}), 2, {}, {}, 10);
  EXPECT_THROW(shard.push(2, 0, torch::zeros({ps.part(0).size()})), model::error);
  EXPECT_THROW(shard.push(0, 0, torch::zeros({3})), model::error);
  EXPECT_THROW(shard.step(), model::error); // nothing pushed
}

TEST(ps_exchange, staleness_bounds_the_steps_ahead) {
  EXPECT_TRUE(may_compute(0, 0, 0));
  EXPECT_FALSE(may_compute(1, 0, 0)); // BSP: step 1 needs step 0's weights
  EXPECT_TRUE(may_compute(1, 1, 0));
  EXPECT_TRUE(may_compute(2, 0, 2));
  EXPECT_FALSE(may_compute(3, 0, 2));
  EXPECT_TRUE(may_compute(5, 3, 2));
}

namespace {

/// W workers and S shards exchanging `steps` steps of random gradients
/// through ps_exchange and shard_optimizer; returns worker w's parameters
/// after the run (every worker's, which must be alike).
std::vector<std::vector<at::Tensor>> simulate_ps(const model::flat_layout& layout,
                                                 const std::vector<at::Tensor>& initial,
                                                 const std::vector<std::vector<std::vector<at::Tensor>>>& grads,
                                                 int32_t shards, const model::optimizer_spec& opt) {
  const auto workers = static_cast<int32_t>(grads.front().size());
  std::vector<ps_exchange> sides(static_cast<size_t>(workers), ps_exchange(layout, shards));
  std::vector<std::vector<at::Tensor>> params(static_cast<size_t>(workers));
  for (auto& p : params)
    for (const auto& t : initial)
      p.push_back(t.clone());
  std::vector<shard_optimizer> shard;
  const auto flat = model::flatten(initial, layout);
  model::lr_schedule schedule{opt.lr, false, 1, 1, 0};
  for (int32_t s = 0; s < shards; ++s)
    shard.emplace_back(sides[0].part(s), model::slice(flat, sides[0].part(s)), workers, opt,
                       schedule, 100);
  for (int64_t k = 0; k < static_cast<int64_t>(grads.size()); ++k) {
    for (int32_t w = workers - 1; w >= 0; --w) { // arrival order does not matter
      auto slices = sides[static_cast<size_t>(w)].split(grads[static_cast<size_t>(k)][static_cast<size_t>(w)]);
      for (int32_t s = 0; s < shards; ++s)
        shard[static_cast<size_t>(s)].push(w, k, slices[static_cast<size_t>(s)]);
    }
    for (int32_t s = 0; s < shards; ++s) {
      EXPECT_TRUE(shard[static_cast<size_t>(s)].ready());
      auto next = shard[static_cast<size_t>(s)].step();
      for (auto& side : sides)
        side.receive(s, k, next);
    }
    for (int32_t w = 0; w < workers; ++w) {
      EXPECT_TRUE(sides[static_cast<size_t>(w)].complete());
      sides[static_cast<size_t>(w)].apply(params[static_cast<size_t>(w)]);
    }
  }
  return params;
}

} // namespace

// S = 1, 2, 3 (fc1 split across shards) and W = 1, 2, 3: the shards' steps
// equal, bit for bit, the reference's per parameter: the W gradients summed
// in worker order, divided by W, one sgd_step_out_of_place.
TEST(ps_exchange, equals_the_reference_step_bit_for_bit) {
  const auto m = model::testing::tiny_model();
  const auto layout = model::make_flat_layout(m);
  const auto initial = m.parameters();
  model::optimizer_spec opt;
  opt.lr = 0.05;
  opt.momentum = 0.9;
  opt.weight_decay = 1e-3;
  torch::manual_seed(11);
  for (int32_t workers : {1, 2, 3}) {
    std::vector<std::vector<std::vector<at::Tensor>>> grads(3); // [step][worker][key]
    for (auto& step : grads)
      for (int32_t w = 0; w < workers; ++w) {
        step.emplace_back();
        for (const auto& p : initial)
          step.back().push_back(torch::randn_like(p));
      }
    std::vector<at::Tensor> expected, momentum;
    for (const auto& p : initial) {
      expected.push_back(p.detach().clone());
      momentum.push_back(torch::zeros_like(p));
    }
    for (size_t k = 0; k < grads.size(); ++k)
      for (size_t i = 0; i < initial.size(); ++i) {
        std::vector<at::Tensor> per_worker;
        for (const auto& g : grads[k])
          per_worker.push_back(g[i]);
        auto mean = at::div(model::worker_order_sum(per_worker), static_cast<double>(workers));
        expected[i] = model::sgd_step_out_of_place(expected[i], mean.reshape(expected[i].sizes()),
                                                   momentum[i], opt, k == 0);
      }
    for (int32_t shards : {1, 2, 3}) {
      auto got = simulate_ps(layout, initial, grads, shards, opt);
      for (const auto& params : got)
        for (size_t i = 0; i < initial.size(); ++i)
          EXPECT_TRUE(torch::equal(params[i], expected[i]))
            << "W=" << workers << " S=" << shards << " key " << layout.keys[i].name;
    }
  }
}

// -- the section and the plan ---------------------------------------------------------

namespace {

/// The small data-parallel job with the `data_parallel:` section under test.
const topology_fixture ps = data_parallel_topology("ps.yaml");

} // namespace

TEST(ps_section, refuses_bad_keys_with_file_and_line) {
  auto zero = ps.refusal("  exchange: ps\n  shards: 0\n");
  EXPECT_NE(zero.find("ps.yaml:13"), std::string::npos) << zero;
  EXPECT_NE(zero.find("from 1 to 64"), std::string::npos) << zero;
  EXPECT_NE(ps.refusal("  exchange: ps\n  shards: 65\n").find("ps.yaml:13"), std::string::npos);
  EXPECT_NE(ps.refusal("  exchange: ps\n  max_staleness: -1\n").find("ps.yaml:13"),
            std::string::npos);
  auto ring = ps.refusal("  exchange: ring\n  max_staleness: 2\n");
  EXPECT_NE(ring.find("ps.yaml:13"), std::string::npos) << ring;
  EXPECT_NE(ring.find("exchange: ps only"), std::string::npos) << ring;
  EXPECT_NE(ps.refusal("  shards: 2\n").find("ps.yaml:12"), std::string::npos); // ring by default
  auto nodes = ps.refusal("  exchange: ps\n  shards: 2\n  shard_nodes: [a]\n");
  EXPECT_NE(nodes.find("ps.yaml:14"), std::string::npos) << nodes;
}

TEST(ps_plan, is_workers_and_shards_with_peer_edges_both_ways) {
  auto p = ps.plan_for("  workers: 2\n  exchange: ps\n  shards: 3\n  max_staleness: 1\n");
  ASSERT_EQ(p.actors.size(), 5u);
  for (size_t s = 0; s < 3; ++s) {
    const auto& a = p.actors[2 + s];
    EXPECT_EQ(a.role, "data_parallel_shard");
    EXPECT_EQ(a.name, "shard." + std::to_string(s));
    EXPECT_TRUE(a.trainable); // it checkpoints its slice
    EXPECT_TRUE(a.starts);
    EXPECT_EQ(a.result, "");
    EXPECT_FALSE(a.sends_weights);
  }
  EXPECT_EQ(p.actors[0].result, "workers");
  EXPECT_TRUE(p.actors[0].sends_weights);
  std::vector<std::string> edges;
  for (const auto& e : p.edges) {
    EXPECT_EQ(e.kind, planned_edge::kind_t::peer);
    edges.push_back(e.from + ">" + e.to + "#" + std::to_string(e.index));
  }
  EXPECT_EQ(edges.size(), 12u);
  EXPECT_EQ(edges[0], "worker.0>shard.0#0");
  EXPECT_EQ(edges[1], "shard.0>worker.0#0");
  EXPECT_EQ(edges[11], "shard.2>worker.1#1");
  auto worker = data_parallel::parse_worker_settings(p.actors[1].settings);
  ASSERT_TRUE(worker) << baton::describe(worker.error());
  EXPECT_EQ(worker->exchange, "ps");
  EXPECT_EQ(worker->shards, 3);
  EXPECT_EQ(worker->max_staleness, 1);
}

TEST(ps_plan, places_shards_round_robin_after_the_workers) {
  auto p = ps.plan_for("  workers: 2\n  exchange: ps\n  shards: 2\n", 2);
  ASSERT_EQ(p.actors.size(), 4u);
  EXPECT_NE(p.actors[0].node, p.actors[1].node);
  EXPECT_NE(p.actors[2].node, p.actors[3].node);
  EXPECT_FALSE(p.actors[2].node.empty());
}

TEST(ps_plan, shard_settings_round_trip_and_garbage_is_refused) {
  auto p = ps.plan_for("  workers: 3\n  exchange: ps\n  shards: 2\n");
  ASSERT_EQ(p.actors.size(), 5u);
  auto spec = data_parallel::parse_shard_settings(p.actors[4].settings);
  ASSERT_TRUE(spec) << baton::describe(spec.error());
  EXPECT_EQ(spec->shard, 1);
  EXPECT_EQ(spec->shards, 2);
  EXPECT_EQ(spec->workers, 3);
  EXPECT_EQ(spec->model.name, "convnet");
  EXPECT_EQ(spec->data.plan.batch_size, 16);
  EXPECT_EQ(training_samples(spec->data), 192);
  EXPECT_EQ(to_yaml(*spec), p.actors[4].settings);
  auto out_of_range = p.actors[4].settings;
  out_of_range.replace(out_of_range.find("shard: 1"), 8, "shard: 2");
  expect_bad_config(data_parallel::parse_shard_settings,
                    {"", "[1, 2]", "shard: 0", out_of_range});
}

// -- runs against the local reference --------------------------------------------------

namespace {

class ps_run : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("ps"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/data-parallel.yaml made small (synthetic data, a few steps)
  /// with the parameter server.
  static std::vector<std::string> job(int32_t workers, int32_t shards,
                                      int32_t max_staleness = 0) {
    return {"run",   source_path("configs/data-parallel.yaml"),
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=200", // 200 / W: padded for W = 3
            "--set", "data.synthetic_test=64",
            "--set", "data.batch_size=16",
            "--set", "data.epochs=2",
            "--set", "data_parallel.model=convnet",
            "--set", "data_parallel.workers=" + std::to_string(workers),
            "--set", "data_parallel.exchange=ps",
            "--set", "data_parallel.shards=" + std::to_string(shards),
            "--set", "data_parallel.max_staleness=" + std::to_string(max_staleness),
            "--set", "runtime.compute_threads=1"};
  }

  /// Steps of the run: ceil(ceil(200 / W) / 16) per epoch, 2 epochs.
  static int64_t steps(int32_t workers) {
    int64_t share = (200 + workers - 1) / workers;
    return 2 * ((share + 15) / 16);
  }

  static void expect_exactly_once(const nlohmann::json& m, int32_t workers) {
    ASSERT_TRUE(m.contains("trained")) << m.dump();
    int64_t trained = 0;
    for (const auto& [actor, count] : m.at("trained").items()) {
      EXPECT_EQ(count.at("trained").get<int64_t>(), steps(workers)) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
      trained += count.at("trained").get<int64_t>();
    }
    EXPECT_EQ(trained, workers * steps(workers));
  }

  /// Bytes per edge: per step, worker -> shard s its part's gradient and
  /// shard s -> worker its part's new weights (float32), for every edge.
  static void expect_edge_bytes(const nlohmann::json& m, int32_t workers, int32_t shards) {
    model::model_spec convnet;
    convnet.name = "convnet";
    const auto parts = shard_parts(model::make_flat_layout(data_parallel::make_worker_model(convnet)),
                                   shards);
    std::map<std::string, int64_t> expected, got;
    for (int32_t w = 0; w < workers; ++w)
      for (int32_t s = 0; s < shards; ++s) {
        const auto bytes = steps(workers) * parts[static_cast<size_t>(s)].size() * 4;
        expected[worker_name(w) + ">" + shard_name(s)] = bytes;
        expected[shard_name(s) + ">" + worker_name(w)] = bytes;
      }
    for (const auto& e : m.at("edges"))
      got[e.at("from").get<std::string>() + ">" + e.at("to").get<std::string>()] =
        e.at("bytes").get<int64_t>();
    EXPECT_EQ(got, expected);
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// W = 2 with one shard, W = 2 with three (convnet layers split across
// shards), W = 3 with two (a padded share, a three-term sum): the actors'
// weights are the reference's (worker-order sums), bit for bit, on every
// worker; every sample trained once; every edge carried its bytes.
TEST_F(ps_run, bsp_equals_the_local_reference) {
  for (auto [workers, shards] : {std::pair{2, 1}, std::pair{2, 3}, std::pair{3, 2}}) {
    auto tag = "w" + std::to_string(workers) + "s" + std::to_string(shards);
    auto local = run_job(*dir_, with(job(workers, shards), {"--mode", "local"}), tag + "-local");
    auto actors = run_job(*dir_, job(workers, shards), tag + "-embedded");
    auto reference = digests_by_actor(local, "data_parallel_worker");
    ASSERT_EQ(reference.size(), static_cast<size_t>(workers));
    EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker"), reference) << tag;
    expect_exactly_once(actors, workers);
    expect_edge_bytes(actors, workers, shards);
  }
}

TEST_F(ps_run, node_processes_equal_embedded) {
  auto embedded = run_job(*dir_, job(2, 2), "embedded");
  auto nodes = run_job(*dir_, with(job(2, 2), {"--local-nodes", "2"}), "nodes");
  auto digests = digests_by_actor(embedded, "data_parallel_worker");
  ASSERT_EQ(digests.size(), 2u);
  EXPECT_EQ(digests_by_actor(nodes, "data_parallel_worker"), digests);
  expect_edge_bytes(nodes, 2, 2);
}

// Bounded staleness: workers compute on weights up to 2 steps old, so the
// weights are not the reference's; the run still ends with every sample
// trained once, every worker holding the shards' final weights, every step
// exchanged, and an accuracy near the synchronous run's.
TEST_F(ps_run, bounded_staleness_trains_every_sample_once) {
  auto bsp = run_job(*dir_, job(3, 2), "bsp");
  auto stale = run_job(*dir_, job(3, 2, 2), "stale");
  expect_exactly_once(stale, 3);
  expect_edge_bytes(stale, 3, 2);
  auto digests = digests_by_actor(stale, "data_parallel_worker");
  ASSERT_EQ(digests.size(), 3u);
  for (const auto& [actor, digest] : digests)
    EXPECT_EQ(digest, digests.begin()->second) << actor;
  auto accuracy = [](const nlohmann::json& m) {
    return m.at("heads").at(0).at("test_accuracy").get<double>();
  };
  EXPECT_GT(accuracy(stale), accuracy(bsp) - 0.15) << stale.at("heads").dump();
}
