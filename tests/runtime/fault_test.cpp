// Faults and recovery end to end (DESIGN.md invariant 8): real `baton`
// processes, faults injected the way a user injects them (`--fault`), and
// the weights compared with the fault-free run of the same seed.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "tests/support/baton_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

class faults : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("faults"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// The short gpipe pipeline (2 epochs of 16 steps, a checkpoint every 4).
  static std::vector<std::string> pipeline_job() { return short_pipeline_job(); }

  /// A short transfer job (3 heads on the frozen backbone, at its initial
  /// weights: what a fault changes does not depend on a pre-trained one, whose
  /// 20,000 samples a fresh clone would pre-train first).
  static std::vector<std::string> transfer_job() {
    return {"run",   source_path("configs/transfer.yaml"),
            "--set", "backbone.checkpoint=none",
            "--set", "data.train_limit=1024",
            "--set", "data.test_limit=256",
            "--set", "runtime.checkpoint_every=4"};
  }

  /// Equal weights and exactly-once counts: every microbatch trained once.
  static void expect_same_training(const nlohmann::json& faulty, const nlohmann::json& clean) {
    EXPECT_EQ(digests_by_actor(faulty), digests_by_actor(clean));
    EXPECT_FALSE(digests_by_actor(clean).empty());
    EXPECT_EQ(faulty.at("trained"), clean.at("trained"));
    for (const auto& [actor, count] : faulty.at("trained").items()) {
      EXPECT_GT(count.at("trained").get<int64_t>(), 0) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    }
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// A stage throws during step 9: every actor restarts from the checkpoint of
// step 8 and the run ends with the fault-free weights.
TEST_F(faults, a_stage_that_throws_restarts_from_its_checkpoint) {
  const auto& clean = shared_run(*dir_, pipeline_job(), "gpipe-clean");
  auto faulty = run_job(
    *dir_, with(pipeline_job(), {"--fault", "kind=throw,actor=stage1,at_step=9"}), "gpipe-throw");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  const auto& f = faulty.at("faults")[0];
  EXPECT_EQ(f.at("kind"), "throw");
  EXPECT_EQ(f.at("target"), "stage1");
  EXPECT_EQ(f.at("restored_step"), 8);
  EXPECT_GE(f.at("recovered_after_ms").get<int64_t>(), 0);
  EXPECT_EQ(faulty.at("restarts"), 1);
  EXPECT_EQ(clean.at("restarts"), 0);
}

// The same over node processes, with the node of stage 0 SIGKILLed after
// step 6: its actors move to a surviving node.
TEST_F(faults, a_killed_node_is_replaced) {
  const auto& clean =
    shared_run(*dir_, with(pipeline_job(), {"--local-nodes", "3"}), "nodes-clean");
  auto faulty = run_job(*dir_,
                        with(pipeline_job(), {"--local-nodes", "3", "--fault",
                                              "kind=kill_node,node=n2,at_step=6"}),
                        "nodes-kill");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  const auto& f = faulty.at("faults")[0];
  EXPECT_EQ(f.at("kind"), "kill_node");
  EXPECT_EQ(f.at("target"), "n2");
  EXPECT_GE(f.at("detected_after_ms").get<int64_t>(), 0);
  EXPECT_EQ(f.at("restored_step").get<int64_t>() % 4, 0);
  for (const auto& a : faulty.at("actors"))
    EXPECT_NE(a.at("node"), "n2") << a.at("name");
}

// A stage that computes its predecessor's last weight gradient
// (weight_gradient: next) throws during step 9, over node processes: both
// restart from the checkpoint of step 8, the halves of the lost steps are
// computed again, and the run ends with the fault-free weights.
TEST_F(faults, a_stage_computing_the_weight_half_of_the_one_before_restarts) {
  const auto next = with(pipeline_job(),
                         {"--local-nodes", "2", "--set",
                          "pipeline.stages=[{last_layer: conv3, weight_gradient: next}, "
                          "{last_layer: fc2}]"});
  auto clean = run_job(*dir_, next, "next-clean");
  auto faulty =
    run_job(*dir_, with(next, {"--fault", "kind=throw,actor=stage1,at_step=9"}), "next-throw");
  expect_same_training(faulty, clean);
  EXPECT_EQ(faulty.at("restarts"), 1);
}

// The transfer job: a head throws; the frozen stages and the other heads
// restart too, and every head ends as in the fault-free run.
TEST_F(faults, a_head_that_throws_in_the_transfer_job) {
  const auto& clean = shared_run(*dir_, transfer_job(), "transfer-clean");
  auto faulty = run_job(
    *dir_, with(transfer_job(), {"--fault", "kind=throw,actor=footwear,at_step=6"}),
    "transfer-throw");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  EXPECT_EQ(faulty.at("faults")[0].at("restored_step"), 4);
}

// Without checkpoints a fault restarts from the initial weights.
TEST_F(faults, without_checkpoints_the_job_restarts_from_the_beginning) {
  auto job = with(pipeline_job(), {"--set", "runtime.checkpoint_every=0"});
  auto clean = run_job(*dir_, job, "scratch-clean");
  auto faulty =
    run_job(*dir_, with(job, {"--fault", "kind=throw,actor=stage0,at_step=3"}), "scratch-throw");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  EXPECT_EQ(faulty.at("faults")[0].at("restored_step"), 0);
}

// The coordinator itself is killed: `--resume DIR` continues from the
// checkpoints in DIR and ends with the fault-free weights.
TEST_F(faults, resume_after_the_coordinator_was_killed) {
  auto checkpoints = dir_->path() + "/resume-checkpoints";
  auto job = with(pipeline_job(), {"--set", "runtime.checkpoint_dir=" + checkpoints, "--set",
                                   "data.epochs=3"});
  auto clean = run_job(*dir_, with(pipeline_job(), {"--set", "data.epochs=3"}), "resume-clean");

  // Kill it once the last stage has a checkpoint of step 12 (of 48).
  auto marker = checkpoints + "/stage2/step-000000000012.ckpt";
  baton_process run{job, dir_->path() + "/resume-killed.log"};
  run.await_file(marker, std::chrono::minutes(5));
  run.signal(SIGKILL);
  run.wait();
  ASSERT_TRUE(fs::exists(marker)) << "the run made no checkpoint of step 12";

  auto resumed = run_job(*dir_, with(job, {"--resume", checkpoints}), "resume-resumed");
  expect_same_training(resumed, clean);
}

// A microbatch dropped on an edge stalls the pipeline: the stall timeout
// detects it and the job restarts from its checkpoints. A delay on another
// edge changes the timing only.
TEST_F(faults, a_dropped_microbatch_is_detected_by_the_stall_timeout) {
  const auto& clean = shared_run(*dir_, pipeline_job(), "gpipe-clean");
  auto faulty = run_job(*dir_,
                        with(pipeline_job(),
                             {"--set", "runtime.stall_timeout_ms=3000", "--fault",
                              "kind=drop,from=stage0,to=stage1,at_step=5", "--fault",
                              "kind=delay,from=source,to=stage0,delay_ms=5"}),
                        "drop");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  const auto& f = faulty.at("faults")[0];
  EXPECT_EQ(f.at("kind"), "drop");
  EXPECT_EQ(f.at("target"), "stage0->stage1");
  EXPECT_EQ(f.at("restored_step"), 4);
}

// Issue 10 item 7: a frozen stage sends through a broadcasting fanout, so
// it can be the sender of an edge fault. A delay on its edge to one head
// changes the timing only; a microbatch dropped on it is noticed by that
// head when the rest of its step comes, and the job restarts from its
// checkpoints. Every head ends as in the fault-free run.
TEST_F(faults, edge_faults_from_a_frozen_stage_end_with_the_fault_free_weights) {
  const auto& clean = shared_run(*dir_, transfer_job(), "transfer-clean");
  auto delayed = run_job(
    *dir_, with(transfer_job(), {"--fault", "kind=delay,from=stage2,to=footwear,delay_ms=5"}),
    "frozen-delay");
  expect_same_training(delayed, clean);
  EXPECT_EQ(delayed.at("faults").size(), 0u);
  EXPECT_EQ(delayed.at("restarts"), 0);
  auto dropped = run_job(
    *dir_, with(transfer_job(), {"--fault", "kind=drop,from=stage2,to=all10,at_step=5"}),
    "frozen-drop");
  expect_same_training(dropped, clean);
  ASSERT_EQ(dropped.at("faults").size(), 1u);
  EXPECT_EQ(dropped.at("faults")[0].at("target"), "stage2->all10");
  EXPECT_EQ(dropped.at("faults")[0].at("restored_step"), 4);
}

// Seeded chaos over node processes: throws, kills and stops at random steps;
// the run still ends with the fault-free weights.
TEST_F(faults, seeded_chaos_ends_with_the_fault_free_weights) {
  const auto& clean =
    shared_run(*dir_, with(pipeline_job(), {"--local-nodes", "3"}), "nodes-clean");
  auto faulty = run_job(*dir_,
                        with(pipeline_job(), {"--local-nodes", "3", "--set",
                                              "runtime.max_restarts=20", "--fault",
                                              "kind=chaos,rate=0.08,seed=5"}),
                        "chaos");
  expect_same_training(faulty, clean);
  EXPECT_GE(faulty.at("faults").size(), 1u);
  EXPECT_EQ(faulty.at("restarts").get<size_t>(), faulty.at("faults").size());
}

// Faults that cannot work are refused before anything starts.
TEST_F(faults, impossible_faults_are_refused) {
  auto unknown = run_baton(with(pipeline_job(), {"--fault", "kind=throw,actor=stage7,at_step=1"}));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.text;
  EXPECT_NE(unknown.text.find("stage7"), std::string::npos) << unknown.text;
  auto embedded =
    run_baton(with(pipeline_job(), {"--fault", "kind=kill_node,node=n1,at_step=1"}));
  EXPECT_EQ(embedded.exit_code, 2) << embedded.text;
  EXPECT_NE(embedded.text.find("embedded"), std::string::npos) << embedded.text;
  auto async = run_baton(with(pipeline_job(), {"--set", "pipeline.schedule=1f1b"}));
  EXPECT_EQ(async.exit_code, 2) << async.text;
  EXPECT_NE(async.text.find("synchronous"), std::string::npos) << async.text;
  auto malformed = run_baton(with(pipeline_job(), {"--fault", "kill_node"}));
  EXPECT_EQ(malformed.exit_code, 2) << malformed.text;
}

// Issue 9: checkpoints of step 256 and later restore (the version used to
// read back modulo 256). A transfer head throws at step 290 of 300 and a
// gpipe stage at step 270: both recover from their newest checkpoint.
TEST_F(faults, recovery_past_step_256) {
  auto transfer = with(transfer_job(), {"--set", "data.train_limit=2400", "--set",
                                        "data.batch_size=8", "--set",
                                        "runtime.checkpoint_every=20"});
  auto clean = run_job(*dir_, transfer, "long-transfer-clean");
  auto faulty = run_job(*dir_, with(transfer, {"--fault", "kind=throw,actor=all10,at_step=290"}),
                        "long-transfer-throw");
  expect_same_training(faulty, clean);
  ASSERT_EQ(faulty.at("faults").size(), 1u);
  EXPECT_EQ(faulty.at("faults")[0].at("restored_step"), 280);

  auto pipeline = with(pipeline_job(), {"--set", "data.train_limit=4480", "--set",
                                        "data.batch_size=16", "--set", "data.epochs=1",
                                        "--set", "runtime.checkpoint_every=20"});
  auto pipeline_clean = run_job(*dir_, pipeline, "long-gpipe-clean");
  auto pipeline_faulty =
    run_job(*dir_, with(pipeline, {"--fault", "kind=throw,actor=stage1,at_step=270"}),
            "long-gpipe-throw");
  expect_same_training(pipeline_faulty, pipeline_clean);
  ASSERT_EQ(pipeline_faulty.at("faults").size(), 1u);
  EXPECT_EQ(pipeline_faulty.at("faults")[0].at("restored_step"), 260);
}

// `--resume DIR` on the checkpoints of a finished run of 300 steps (the
// tester's case of issue 9: "step-000000000300.ckpt: holds step 44, not
// 300"). Since issue 21 a finished run is not resumed: the refusal names
// its step and where its metrics are.
TEST_F(faults, resume_of_a_finished_run_of_300_steps_is_refused) {
  auto checkpoints = dir_->path() + "/resume-300";
  auto job = with(transfer_job(), {"--set", "data.train_limit=2400", "--set",
                                   "data.batch_size=8", "--set", "runtime.checkpoint_every=20",
                                   "--set", "runtime.checkpoint_dir=" + checkpoints});
  run_job(*dir_, job, "resume-300-clean");
  ASSERT_TRUE(fs::exists(fs::path(checkpoints) / "all10" / "step-000000000300.ckpt"));
  ASSERT_TRUE(fs::exists(fs::path(checkpoints) / "run.yaml"));
  auto resumed = run_baton({"run", "--resume", checkpoints});
  EXPECT_EQ(resumed.exit_code, 2) << resumed.text;
  EXPECT_NE(resumed.text.find("finished (its newest checkpoint is of step 300; metrics in " +
                              dir_->path() + "/resume-300-clean.json"),
            std::string::npos)
    << resumed.text;
}

// Issue 9: `--resume` with other training settings trained a mixed run
// (23,840 samples in a 20,000-sample epoch). It is refused with what
// differs; runtime settings and placement may change.
TEST_F(faults, resume_with_other_training_settings_is_refused) {
  auto checkpoints = dir_->path() + "/resume-mismatch";
  auto job = with(pipeline_job(), {"--set", "runtime.checkpoint_dir=" + checkpoints});
  // A run that failed after its checkpoint of step 8 (a finished one is not
  // resumed at all).
  auto first = run_baton(with(job, {"--set", "runtime.max_restarts=0", "--fault",
                                    "kind=throw,actor=stage1,at_step=9"}));
  ASSERT_EQ(first.exit_code, 1) << first.text;
  auto other = run_baton(with(job, {"--set", "data.batch_size=32", "--resume", checkpoints}));
  EXPECT_EQ(other.exit_code, 2) << other.text;
  EXPECT_NE(other.text.find("data.batch_size: 64 then, 32 now"), std::string::npos)
    << other.text;
  auto other_file = run_baton({"run", source_path("configs/transfer.yaml"), "--set",
                               "backbone.checkpoint=none", "--resume", checkpoints});
  EXPECT_EQ(other_file.exit_code, 2) << other_file.text;
  EXPECT_NE(other_file.text.find("job: pipeline then, transfer now"), std::string::npos)
    << other_file.text;
  // Runtime and placement are free: the same job over local nodes resumes.
  auto moved = run_baton(with(job, {"--set", "runtime.stall_timeout_ms=60000", "--local-nodes",
                                    "2", "--resume", checkpoints}));
  EXPECT_EQ(moved.exit_code, 0) << moved.text;
}
