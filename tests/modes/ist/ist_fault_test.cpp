// Faults and recovery of job: ist (issue 12 section 3, DESIGN.md invariant
// 8): a worker or a shard lost in the middle of a round rolls the round
// back to the shards' checkpoint at its start and replays it with the same
// partition. Real `baton` processes, faults injected as a user injects them
// (`--fault`), the weights compared with the fault-free run of the same seed
// and the local steps counted: none trained twice, none missing.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

/// Local steps per worker in job(): floor(floor(400 / 16) / 2) = 12 per
/// epoch, 2 epochs.
constexpr int64_t ist_steps_per_worker = 24;

class ist_faults : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("ist-faults"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// configs/ist.yaml made small: W = S = 2, synthetic data, 12 local steps
  /// per worker per epoch in rounds of 3: 4 rounds per epoch, 8 in all
  /// (the job's steps), a checkpoint every 2 rounds.
  static std::vector<std::string> job() {
    return {"run",   source_path("configs/ist.yaml"),
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=400",
            "--set", "data.synthetic_test=64",
            "--set", "data.batch_size=16",
            "--set", "data.epochs=2",
            "--set", "ist.hidden=[64, 48]",
            "--set", "ist.local_steps=3",
            "--set", "ist.optimizer.momentum=0.5",
            "--set", "ist.workers=2",
            "--set", "ist.shards=2",
            "--set", "runtime.compute_threads=1",
            "--set", "runtime.checkpoint_every=2"};
  }

  /// The fault-free run, once for the suite (embedded == node processes:
  /// ist_mode_test checks it).
  static const nlohmann::json& clean() {
    static const nlohmann::json metrics = run_job(*dir_, job(), "clean");
    return metrics;
  }

  /// The fault-free weights and exactly-once counts: every worker trained
  /// each of its local steps once, none twice; after `restarts` restarts.
  static void expect_fault_free_training(const nlohmann::json& faulty, int64_t restarts = 1) {
    const auto& reference = clean();
    auto digests = digests_by_actor(reference, "ist_worker");
    ASSERT_EQ(digests.size(), 1u); // worker 0 evaluates the whole network
    EXPECT_EQ(digests_by_actor(faulty, "ist_worker"), digests);
    EXPECT_EQ(digests_by_actor(faulty), digests_by_actor(reference));
    EXPECT_EQ(faulty.at("trained"), reference.at("trained"));
    ASSERT_EQ(faulty.at("trained").size(), 2u);
    for (const auto& [actor, count] : faulty.at("trained").items()) {
      EXPECT_EQ(count.at("trained").get<int64_t>(), ist_steps_per_worker) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    }
    EXPECT_EQ(faulty.at("restarts"), restarts);
    EXPECT_EQ(reference.at("restarts"), 0);
  }

  /// The one fault record of `faulty`.
  static const nlohmann::json& only_fault(const nlohmann::json& faulty) {
    static const nlohmann::json none = nlohmann::json::object();
    EXPECT_EQ(faulty.at("faults").size(), 1u) << faulty.at("faults").dump();
    return faulty.at("faults").empty() ? none : faulty.at("faults")[0];
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// Worker 1 throws with its pieces of round 5 in hand (the shards have sent
// round 5, worker 0 may have trained it): the job restarts from the
// checkpoint of round 4 and replays rounds 4 and 5.
TEST_F(ist_faults, a_worker_that_throws_mid_round_replays_from_the_round_checkpoint) {
  auto faulty =
    run_job(*dir_, with(job(), {"--fault", "kind=throw,actor=worker.1,at_step=5"}), "worker");
  expect_fault_free_training(faulty);
  const auto& f = only_fault(faulty);
  EXPECT_EQ(f.at("kind"), "throw");
  EXPECT_EQ(f.at("target"), "worker.1");
  EXPECT_EQ(f.at("restored_step"), 4);
  EXPECT_GE(f.at("recovered_after_ms").get<int64_t>(), 0);
}

// Shard 0 throws once the first trained pieces of round 3 are back in its
// network (half of the round written back): rolled back to round 2.
TEST_F(ist_faults, a_shard_that_throws_mid_round_is_rolled_back) {
  auto faulty =
    run_job(*dir_, with(job(), {"--fault", "kind=throw,actor=shard.0,at_step=3"}), "shard");
  expect_fault_free_training(faulty);
  const auto& f = only_fault(faulty);
  EXPECT_EQ(f.at("target"), "shard.0");
  EXPECT_EQ(f.at("restored_step"), 2);
}

// Without checkpoints the job replays from the initial network (round 0).
TEST_F(ist_faults, without_checkpoints_it_restarts_from_the_initial_network) {
  auto faulty = run_job(*dir_,
                        with(job(), {"--set", "runtime.checkpoint_every=0", "--fault",
                                     "kind=throw,actor=shard.1,at_step=6"}),
                        "scratch");
  expect_fault_free_training(faulty);
  EXPECT_EQ(only_fault(faulty).at("restored_step"), 0);
}

// Over two node processes: shard 1 (on n2, with worker 1) throws mid-round.
TEST_F(ist_faults, a_shard_on_a_node_process_throws) {
  auto faulty = run_job(*dir_,
                        with(job(), {"--local-nodes", "2", "--fault",
                                     "kind=throw,actor=shard.1,at_step=5"}),
                        "nodes-shard");
  expect_fault_free_training(faulty);
  EXPECT_EQ(only_fault(faulty).at("restored_step"), 4);
}

// Node n2 (worker 1 and shard 1) SIGKILLs itself after round 3: a worker
// and a shard are lost in the middle of round 4; both restart on n1 from
// the checkpoint of round 2 and the run ends with the fault-free weights.
TEST_F(ist_faults, a_killed_node_loses_a_worker_and_a_shard) {
  auto faulty = run_job(*dir_,
                        with(job(), {"--local-nodes", "2", "--fault",
                                     "kind=kill_node,node=n2,at_step=3"}),
                        "nodes-kill");
  expect_fault_free_training(faulty);
  const auto& f = only_fault(faulty);
  EXPECT_EQ(f.at("kind"), "kill_node");
  EXPECT_EQ(f.at("target"), "n2");
  EXPECT_EQ(f.at("restored_step").get<int64_t>() % 2, 0);
  EXPECT_GE(f.at("detected_after_ms").get<int64_t>(), 0);
  for (const auto& a : faulty.at("actors"))
    EXPECT_NE(a.at("node"), "n2") << a.at("name");
}

// Seeded chaos over node processes: workers and shards throw, nodes are
// killed or stopped at random rounds; every restart replays from the newest
// round all of them checkpointed, and the run ends with the fault-free weights.
TEST_F(ist_faults, seeded_chaos_ends_with_the_fault_free_weights) {
  auto faulty = run_job(*dir_,
                        with(job(), {"--local-nodes", "2", "--set", "runtime.max_restarts=20",
                                     "--fault", "kind=chaos,rate=0.3,seed=5"}),
                        "chaos");
  ASSERT_GE(faulty.at("faults").size(), 1u);
  expect_fault_free_training(faulty, static_cast<int64_t>(faulty.at("faults").size()));
}

// `--resume DIR` of a run that failed in round 7: the newest round all
// workers and shards checkpointed is replayed from, to the same weights and
// counts. Once finished, the run is not resumed again (issue 21).
TEST_F(ist_faults, resume_of_a_failed_run_replays_from_its_newest_checkpoint) {
  auto checkpoints = dir_->path() + "/resume";
  auto failed = run_baton(with(job(), {"--set", "runtime.checkpoint_dir=" + checkpoints, "--set",
                                       "runtime.max_restarts=0", "--fault",
                                       "kind=throw,actor=worker.0,at_step=7"}));
  ASSERT_EQ(failed.exit_code, 1) << failed.text;
  auto resumed = run_job(*dir_, {"run", "--resume", checkpoints}, "resumed");
  expect_fault_free_training(resumed, 0);
  auto again = run_baton({"run", "--resume", checkpoints});
  EXPECT_EQ(again.exit_code, 2) << again.text;
  EXPECT_NE(again.text.find("finished (its newest checkpoint is of step"), std::string::npos)
    << again.text;
}

// A delay or drop fault has no credit edge to act on; a round past the
// job's end would never fire: both refused before anything starts.
TEST_F(ist_faults, impossible_faults_are_refused) {
  auto drop = run_baton(with(job(), {"--fault", "kind=drop,from=worker.0,to=shard.1,at_step=2"}));
  EXPECT_EQ(drop.exit_code, 2) << drop.text;
  EXPECT_NE(drop.text.find("not supported by job: ist"), std::string::npos) << drop.text;
  auto late = run_baton(with(job(), {"--fault", "kind=throw,actor=worker.0,at_step=8"}));
  EXPECT_EQ(late.exit_code, 2) << late.text;
  EXPECT_NE(late.text.find("8 rounds"), std::string::npos) << late.text;
}
