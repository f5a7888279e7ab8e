// Faults and recovery of job: data-parallel (issue 11 sections 5 and 6,
// DESIGN.md invariant 8): a worker or a shard lost rolls the job back to the
// newest global step every worker and shard checkpointed, and the run ends
// with the fault-free run's weights, every worker's steps trained exactly
// once. Real `baton` processes, faults injected as a user injects them
// (`--fault`); BSP over the ring and the shards, local SGD, a fixed frozen
// prefix with its cache.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

/// Steps per worker in job(): 512 samples / (W = 2 x 32) = 8 per epoch, 2 epochs.
constexpr int64_t steps_per_worker = 16;

class data_parallel_faults : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("data-parallel-faults"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/data-parallel.yaml made small: 512 Fashion-MNIST samples, W = 2,
  /// batch 32, 2 epochs (16 steps), a checkpoint every 4 steps; `extra` the
  /// variant's settings (the exchange, local SGD, freezing).
  static std::vector<std::string> job(const std::vector<std::string>& extra = {}) {
    return with({"run",   source_path("configs/data-parallel.yaml"),
                 "--set", "data.train_limit=512",
                 "--set", "data.test_limit=128",
                 "--set", "data.batch_size=32",
                 "--set", "data.epochs=2",
                 "--set", "data_parallel.workers=2",
                 "--set", "runtime.compute_threads=1",
                 "--set", "runtime.checkpoint_every=4"},
                extra);
  }

  /// The parameter server: two shards.
  static std::vector<std::string> ps() {
    return {"--set", "data_parallel.exchange=ps", "--set", "data_parallel.shards=2"};
  }

  /// Local SGD: averages after every 3 steps (a checkpoint at step 4 falls
  /// between two averages) and at each epoch end.
  static std::vector<std::string> local_sgd() { return {"--set", "data_parallel.sync_every=3"}; }

  /// The convnet's layers up to pool2 frozen, their output cached.
  static std::vector<std::string> frozen_cached() {
    return {"--set", "data_parallel.freeze.policy=fixed", "--set",
            "data_parallel.freeze.up_to=pool2", "--set", "data_parallel.freeze.cache=memory"};
  }

  /// The fault-free weights (every worker's digest) and exactly-once
  /// counts after `restarts` restarts; `clean` the fault-free run.
  static void expect_fault_free_training(const nlohmann::json& clean,
                                         const nlohmann::json& faulty, int64_t restarts = 1) {
    auto digests = digests_by_actor(clean, "data_parallel_worker");
    ASSERT_EQ(digests.size(), 2u);
    EXPECT_EQ(digests_by_actor(faulty, "data_parallel_worker"), digests);
    ASSERT_EQ(faulty.at("trained").size(), 2u) << faulty.at("trained").dump();
    for (const auto& [actor, count] : faulty.at("trained").items()) {
      EXPECT_EQ(count.at("trained").get<int64_t>(), steps_per_worker) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    }
    EXPECT_EQ(faulty.at("trained"), clean.at("trained"));
    EXPECT_EQ(faulty.at("restarts"), restarts);
    EXPECT_EQ(clean.at("restarts"), 0);
  }

  /// The one fault record of `faulty`.
  static nlohmann::json only_fault(const nlohmann::json& faulty) {
    EXPECT_EQ(faulty.at("faults").size(), 1u) << faulty.at("faults").dump();
    return faulty.at("faults").empty() ? nlohmann::json::object() : faulty.at("faults")[0];
  }

  /// The variant `extra` fault-free and with `fault`: the same weights and
  /// counts, restored from step `restored`.
  static void expect_recovers(const std::vector<std::string>& extra, const std::string& fault,
                              const std::string& tag, int64_t restored,
                              const std::vector<std::string>& faulty_extra = {}) {
    auto clean = run_job(*dir_, job(extra), tag + "-clean");
    auto faulty = run_job(*dir_, with(with(job(extra), faulty_extra), {"--fault", fault}), tag);
    expect_fault_free_training(clean, faulty);
    EXPECT_EQ(only_fault(faulty).at("restored_step"), restored) << tag;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// Worker 1 throws before step 6 (worker 0 may be in its all-reduce): both
// restart from the checkpoint of step 4.
TEST_F(data_parallel_faults, a_worker_that_throws_replays_from_the_step_checkpoint) {
  expect_recovers({}, "kind=throw,actor=worker.1,at_step=6", "ring-worker", 4);
}

// Shard 1 throws at the first push of step 9 (step 8 began epoch 2): the
// workers and shards restart from step 8, each worker at the epoch's start.
TEST_F(data_parallel_faults, a_shard_that_throws_is_rolled_back) {
  expect_recovers(ps(), "kind=throw,actor=shard.1,at_step=9", "ps-shard", 8);
}

// Over two node processes, n2 (worker 1) SIGKILLs itself after step 5:
// worker 1 restarts on n1 and both replay from step 4.
TEST_F(data_parallel_faults, a_killed_node_loses_a_worker) {
  auto clean = run_job(*dir_, job(), "kill-clean");
  auto faulty = run_job(*dir_,
                        with(job(), {"--local-nodes", "2", "--fault",
                                     "kind=kill_node,node=n2,at_step=5"}),
                        "kill");
  expect_fault_free_training(clean, faulty);
  const auto f = only_fault(faulty);
  EXPECT_EQ(f.at("kind"), "kill_node");
  EXPECT_EQ(f.at("restored_step").get<int64_t>() % 4, 0);
  for (const auto& a : faulty.at("actors"))
    EXPECT_NE(a.at("node"), "n2") << a.at("name");
}

// Local SGD: the checkpoint of step 4 holds each worker's own weights one
// step after an average; a throw before step 6 replays steps 4 and 5 and
// the average after step 5.
TEST_F(data_parallel_faults, local_sgd_recovers_between_averages) {
  expect_recovers(local_sgd(), "kind=throw,actor=worker.0,at_step=6", "local-sgd", 4);
}

// A fixed frozen prefix with its cache: the restored workers' caches start
// empty and refill; the weights are the same.
TEST_F(data_parallel_faults, a_frozen_prefix_with_its_cache_recovers) {
  expect_recovers(frozen_cached(), "kind=throw,actor=worker.1,at_step=10", "frozen-cache", 8);
}

// Without checkpoints the job replays from the initial weights (step 0).
TEST_F(data_parallel_faults, without_checkpoints_it_restarts_from_the_initial_weights) {
  expect_recovers({}, "kind=throw,actor=worker.0,at_step=3", "scratch", 0,
                  {"--set", "runtime.checkpoint_every=0"});
}

// What recovery cannot make exact is refused before anything starts, with
// the file and line (or the --set): bounded staleness, adaptive freezing, delay and drop
// (no credit edge), and a step past the job's end.
TEST_F(data_parallel_faults, impossible_recoveries_are_refused_with_file_and_line) {
  // Both come from --set: the error names the --set that set them.
  const std::string where = "--set data_parallel.";
  auto stale = run_baton(job(with(ps(), {"--set", "data_parallel.max_staleness=2"})));
  EXPECT_EQ(stale.exit_code, 2) << stale.text;
  EXPECT_NE(stale.text.find("under BSP only"), std::string::npos) << stale.text;
  auto adaptive = run_baton(job({"--set", "data_parallel.freeze.policy=adaptive"}));
  EXPECT_EQ(adaptive.exit_code, 2) << adaptive.text;
  EXPECT_NE(adaptive.text.find("adaptive freezing"), std::string::npos) << adaptive.text;
  auto drop = run_baton(with(job(), {"--fault", "kind=drop,from=worker.0,to=worker.1,at_step=2"}));
  EXPECT_EQ(drop.exit_code, 2) << drop.text;
  EXPECT_NE(drop.text.find("not supported by job: data-parallel"), std::string::npos) << drop.text;
  auto late = run_baton(with(job(), {"--fault", "kind=throw,actor=worker.0,at_step=16"}));
  EXPECT_EQ(late.exit_code, 2) << late.text;
  EXPECT_NE(late.text.find("16 steps"), std::string::npos) << late.text;
  for (const auto* out : {&stale, &adaptive})
    EXPECT_NE(out->text.find(where), std::string::npos) << out->text;
}
