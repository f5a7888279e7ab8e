// job: ist with ist.kind: resist (issue 12, part B): the section and its
// errors, the plan, the settings codecs, how the state tensors are divided
// among shards and which travel in a round, and real runs (embedded, node
// processes, with faults) against model::ist::run_resist_local, digest for digest.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/role_settings.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/registry.hpp"
#include "messages/errc.hpp"
#include "model/core/error.hpp"
#include "model/ist/resist.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::actors;
using namespace baton::actors::ist;
using namespace baton::testing;
namespace model = baton::model;

namespace {

/// A small ResIST topology (synthetic data) with `section` as its `ist:`
/// section; line 11 is the section's first key.
std::string resist_topology_text(const std::string& section) {
  return "# a ResIST test topology\n"
         "job: ist\n"
         "seed: 7\n"
         "data: {dataset: synthetic, synthetic_train: 96, synthetic_test: 32,\n"
         "       synthetic_shape: [3, 16, 16], batch_size: 8, epochs: 1}\n"
         "backbone: {checkpoint: none, pretrain: {task: all10}}\n"
         "tasks:\n"
         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
         "heads: [{name: all10, task: all10}]\n"
         "ist:\n" +
         section;
}

caf::expected<topology> resist_parse(const std::string& section) {
  return parse_topology(resist_topology_text(section), "resist.yaml", {});
}

std::string resist_refusal(const std::string& section) {
  auto t = resist_parse(section);
  if (t) {
    ADD_FAILURE() << "accepted:\n" << section;
    return "";
  }
  return baton::describe(t.error());
}

bool resist_has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

// -- the section and the plan ----------------------------------------------------------

TEST(resist_section, takes_resnet18_and_refuses_what_does_not_fit) {
  auto t = resist_parse("  kind: resist\n  workers: 3\n  shards: 2\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->backbone.name, "resnet18");
  EXPECT_TRUE(resist_parse("  kind: resist\n  model: resnet18\n"));
  auto mlp = resist_refusal("  kind: resist\n  model: mlp\n");
  EXPECT_TRUE(resist_has(mlp, "resist.yaml:12")) << mlp;
  EXPECT_TRUE(resist_has(mlp, "trains resnet18")) << mlp;
  auto resnet = resist_refusal("  model: resnet18\n"); // kind ist: an mlp
  EXPECT_TRUE(resist_has(resnet, "resist.yaml:11")) << resnet;
  EXPECT_TRUE(resist_has(resnet, "kind: resist")) << resnet;
  auto hidden = resist_refusal("  kind: resist\n  hidden: [64]\n");
  EXPECT_TRUE(resist_has(hidden, "resist.yaml:12")) << hidden;
  EXPECT_TRUE(resist_has(hidden, "widths are fixed")) << hidden;
}

TEST(resist_plan, is_w_workers_and_s_shards_with_their_own_roles) {
  auto t = resist_parse("  kind: resist\n  workers: 3\n  shards: 2\n  local_steps: 5\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto p = plan_of(*t);
  ASSERT_TRUE(p) << baton::describe(p.error());
  ASSERT_EQ(p->actors.size(), 5u);
  EXPECT_EQ(p->edges.size(), 12u);
  for (const auto& a : p->actors) {
    const bool worker = a.name.rfind("worker.", 0) == 0;
    EXPECT_EQ(a.role, worker ? "resist_worker" : "resist_shard") << a.name;
    EXPECT_TRUE(a.trainable) << a.name;
    if (worker) {
      auto spec = block_scheme::parse_worker_settings(a.settings);
      ASSERT_TRUE(spec) << baton::describe(spec.error());
      EXPECT_EQ(spec->shape.in_channels, 3);
      EXPECT_EQ(spec->local_steps, 5);
      EXPECT_EQ(spec->workers, 3);
      EXPECT_EQ(block_scheme::to_yaml(*spec), a.settings);
    } else {
      auto spec = block_scheme::parse_shard_settings(a.settings);
      ASSERT_TRUE(spec) << baton::describe(spec.error());
      EXPECT_EQ(spec->shape.classes, 10);
      EXPECT_EQ(spec->seed, 7u);
      EXPECT_EQ(block_scheme::to_yaml(*spec), a.settings);
    }
  }
  EXPECT_FALSE(block_scheme::parse_worker_settings("worker: 0\n"));
  EXPECT_FALSE(block_scheme::parse_shard_settings("{shard: 2, shards: 2, workers: 1}"));
  EXPECT_FALSE(block_scheme::parse_shard_settings("[garbage"));
}

// -- the division of the state --------------------------------------------------------

// Every state tensor belongs to exactly one shard, the ranges in order and
// balanced by bytes to within the largest tensor.
TEST(block_layout, ranges_cover_every_tensor_once_balanced_by_bytes) {
  const auto net = model::ist::make_resist_network(3, 10, 1);
  const auto state = net.state();
  int64_t total = 0, largest = 0;
  for (const auto& t : state) {
    total += static_cast<int64_t>(t.nbytes());
    largest = std::max(largest, static_cast<int64_t>(t.nbytes()));
  }
  for (int32_t shards = 1; shards <= 6; ++shards) {
    const auto layout = make_block_layout(net, shards);
    ASSERT_EQ(layout.bounds.size(), static_cast<size_t>(shards) + 1);
    EXPECT_EQ(layout.bounds.front(), 0u);
    EXPECT_EQ(layout.bounds.back(), state.size());
    EXPECT_TRUE(std::is_sorted(layout.bounds.begin(), layout.bounds.end()));
    for (int32_t s = 0; s < shards; ++s) {
      int64_t bytes = 0;
      for (size_t k = layout.bounds[s]; k < layout.bounds[s + 1]; ++k)
        bytes += static_cast<int64_t>(state[k].nbytes());
      EXPECT_LE(bytes, total / shards + largest) << s << " of " << shards;
    }
  }
}

// A round's messages: a shared layer's tensors travel with every worker, a
// dealt block's with its holders only; "whole" is the shard's whole range.
TEST(block_layout, a_round_carries_the_layers_the_worker_runs) {
  const auto net = model::ist::make_resist_network(1, 10, 1);
  const int32_t workers = 3, shards = 2;
  const auto layout = make_block_layout(net, shards);
  for (int64_t round = 0; round < 4; ++round) {
    const auto deal = model::ist::make_resist_deal(layout.partitioned.size(), workers, 5, round);
    std::map<size_t, std::vector<int32_t>> senders;
    for (int32_t w = 0; w < workers; ++w)
      for (int32_t s = 0; s < shards; ++s) {
        for (size_t k : message_tensors(layout, deal, w, s, false)) {
          EXPECT_GE(k, layout.bounds[s]);
          EXPECT_LT(k, layout.bounds[s + 1]);
          senders[k].push_back(w);
        }
        EXPECT_EQ(message_tensors(layout, deal, w, s, true).size(),
                  layout.bounds[s + 1] - layout.bounds[s]);
      }
    ASSERT_EQ(senders.size(), net.state().size()); // every tensor, by someone
    for (const auto& [k, who] : senders) {
      const auto block = std::find(layout.partitioned.begin(), layout.partitioned.end(),
                                   layout.state_layers[k]);
      if (block == layout.partitioned.end())
        EXPECT_EQ(who, (std::vector<int32_t>{0, 1, 2})) << k;
      else
        EXPECT_EQ(who, deal.holders(static_cast<size_t>(block - layout.partitioned.begin())))
          << k;
    }
  }
  auto state = net.state();
  std::vector<at::Tensor> values{state[0].clone(), torch::zeros({2})};
  EXPECT_THROW(check_block_tensors(values, state, {0, 1}, "x"), model::error);
  EXPECT_THROW(check_block_tensors({state[0]}, state, {0, 1}, "x"), model::error);
  check_block_tensors({state[0], state[1]}, state, {0, 1}, "x");
}

// -- runs against the local reference ------------------------------------------------

namespace {

class resist_run : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("resist"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/resist.yaml made small: synthetic 3 x 16 x 16 samples, 192 of
  /// 8 per step: floor(24 / W) local steps per worker per epoch, 3 per
  /// round, 2 epochs.
  static std::vector<std::string> job(int32_t workers, int32_t shards) {
    return {"run",   source_path("configs/resist.yaml"),
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=192",
            "--set", "data.synthetic_test=32",
            "--set", "data.synthetic_shape=[3, 16, 16]",
            "--set", "data.batch_size=8",
            "--set", "data.epochs=2",
            "--set", "ist.local_steps=3",
            "--set", "ist.optimizer.momentum=0.5", // reset every round: tested too
            "--set", "ist.workers=" + std::to_string(workers),
            "--set", "ist.shards=" + std::to_string(shards),
            "--set", "runtime.compute_threads=1"};
  }

  /// The fault-free run of W = S = 2 with a checkpoint every 2 rounds (4
  /// rounds per epoch, 8 in all), once for the suite.
  static std::vector<std::string> checkpointed() {
    return with(job(2, 2), {"--set", "runtime.checkpoint_every=2"});
  }
  static const nlohmann::json& clean() {
    static const nlohmann::json metrics = run_job(*dir_, checkpointed(), "clean");
    return metrics;
  }

  /// Every worker trained each of its `steps` local steps once, none twice.
  static void expect_exactly_once(const nlohmann::json& m, int32_t workers, int64_t steps) {
    ASSERT_EQ(m.at("trained").size(), static_cast<size_t>(workers)) << m.dump();
    for (const auto& [actor, count] : m.at("trained").items()) {
      EXPECT_EQ(count.at("trained").get<int64_t>(), steps) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    }
  }

  /// The fault-free weights and counts after one restart.
  static void expect_fault_free(const nlohmann::json& faulty) {
    auto digests = digests_by_actor(clean(), "resist_worker");
    ASSERT_EQ(digests.size(), 1u);
    EXPECT_EQ(digests_by_actor(faulty, "resist_worker"), digests);
    expect_exactly_once(faulty, 2, 24);
    EXPECT_EQ(faulty.at("restarts"), 1);
    ASSERT_EQ(faulty.at("faults").size(), 1u);
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

/// Bytes on the edges from `from` in a run's metrics.
int64_t sent_bytes(const nlohmann::json& m, const std::string& from) {
  int64_t bytes = 0;
  for (const auto& e : m.at("edges"))
    if (e.at("from") == from)
      bytes += e.at("bytes").get<int64_t>();
  return bytes;
}

} // namespace

// W = 2 S = 2; W = 3 S = 2 (8 steps per worker: a last round of 2); W = 1
// S = 1 (plain SGD, as the model test shows of the reference): the actors'
// network is the reference's, bit for bit.
TEST_F(resist_run, embedded_equals_the_local_reference) {
  for (const auto& [workers, shards] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{1, 1}}) {
    auto tag = "w" + std::to_string(workers) + "s" + std::to_string(shards);
    auto local = run_job(*dir_, with(job(workers, shards), {"--mode", "local"}), tag + "-local");
    auto actors = run_job(*dir_, job(workers, shards), tag + "-embedded");
    auto reference = digests_by_actor(local, "resist_worker");
    ASSERT_EQ(reference.size(), 1u) << tag; // worker.0: the whole network
    EXPECT_EQ(digests_by_actor(actors, "resist_worker"), reference) << tag;
    expect_exactly_once(actors, workers, 2 * (24 / workers));
  }
}

// A learning-rate schedule (cosine after half an epoch's warm-up; refused
// until 2026-12-06): each sub-ResNet's local step takes its step's lr in
// the run, as the reference's, so the actors (W = 3: rounds of 3, 3 and 2
// steps) end with its network, and not with the constant lr's.
TEST_F(resist_run, a_learning_rate_schedule_equals_the_local_reference) {
  const auto scheduled = with(job(3, 2), {"--set", "ist.optimizer.schedule=cosine", "--set",
                                          "ist.optimizer.warmup_epochs=0.5"});
  auto reference = digests_by_actor(
    run_job(*dir_, with(scheduled, {"--mode", "local"}), "cosine-local"), "resist_worker");
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, scheduled, "cosine-embedded"), "resist_worker"),
            reference);
  EXPECT_NE(digests_by_actor(run_job(*dir_, with(job(3, 2), {"--mode", "local"}),
                                     "constant-local"),
                             "resist_worker"),
            reference);
}

// Two node processes: the same network; each worker sends, per round, the
// tensors of the layers it ran (not the blocks it was not dealt).
TEST_F(resist_run, node_processes_equal_embedded_and_send_only_the_subnet) {
  auto nodes = run_job(*dir_, with(checkpointed(), {"--local-nodes", "2"}), "nodes");
  EXPECT_EQ(digests_by_actor(nodes, "resist_worker"), digests_by_actor(clean(), "resist_worker"));
  const auto net = model::ist::make_resist_network(3, 10, 42);
  const auto layout = make_block_layout(net, 2);
  const auto state = net.state();
  for (int32_t w = 0; w < 2; ++w) {
    int64_t expected = 0;
    for (int64_t round = 0; round < 8; ++round) {
      const auto deal = model::ist::make_resist_deal(layout.partitioned.size(), 2, 42, round);
      for (int32_t s = 0; s < 2; ++s)
        for (size_t k : message_tensors(layout, deal, w, s, false))
          expected += static_cast<int64_t>(state[k].nbytes());
    }
    EXPECT_EQ(sent_bytes(nodes, "worker." + std::to_string(w)), expected) << w;
  }
}

// -- faults ------------------------------------------------------------------------------

// Worker 1 throws with its state of round 5 in hand: replayed from round 4.
TEST_F(resist_run, a_worker_that_throws_mid_round_replays_from_the_round_checkpoint) {
  auto faulty =
    run_job(*dir_, with(checkpointed(), {"--fault", "kind=throw,actor=worker.1,at_step=5"}),
            "worker");
  expect_fault_free(faulty);
  EXPECT_EQ(faulty.at("faults")[0].at("restored_step"), 4);
}

// Shard 0 throws with worker 0's trained tensors of round 3 back: round 2.
TEST_F(resist_run, a_shard_that_throws_mid_round_is_rolled_back) {
  auto faulty =
    run_job(*dir_, with(checkpointed(), {"--fault", "kind=throw,actor=shard.0,at_step=3"}),
            "shard");
  expect_fault_free(faulty);
  EXPECT_EQ(faulty.at("faults")[0].at("restored_step"), 2);
}

// Node n2 (worker 1 and shard 1) SIGKILLs itself after round 3: both
// restart on n1 from a round checkpoint, to the fault-free weights.
TEST_F(resist_run, a_killed_node_loses_a_worker_and_a_shard) {
  auto faulty = run_job(*dir_,
                        with(checkpointed(), {"--local-nodes", "2", "--fault",
                                              "kind=kill_node,node=n2,at_step=3"}),
                        "nodes-kill");
  expect_fault_free(faulty);
  for (const auto& a : faulty.at("actors"))
    EXPECT_NE(a.at("node"), "n2") << a.at("name");
}
