// runtime.stop_at_accuracy (issue 12 section 5: "each run stops at the
// target or at an epoch limit, and says which"): once every head has reached
// the accuracy, the coordinator asks the actors the plan starts to stop, and
// every job ends with every actor's final report, embedded and over node
// processes. Real `baton` processes.

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

/// A target synthetic data reaches after one epoch: any accuracy above chance's tenth.
const std::string target = "runtime.stop_at_accuracy=0.02";

/// A job of `config` made small (synthetic data, 3 epochs) with `extra` overrides.
std::vector<std::string> job(const std::string& config, const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run",   source_path(config),
                                "--set", "data.dataset=synthetic",
                                "--set", "data.synthetic_train=192",
                                "--set", "data.synthetic_test=64",
                                "--set", "data.batch_size=16",
                                "--set", "data.epochs=3",
                                "--set", "runtime.compute_threads=1"};
  for (const auto& e : extra) {
    args.push_back("--set");
    args.push_back(e);
  }
  return args;
}

class stop_at_accuracy : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("stop-at-accuracy"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// A run stopped after its first epoch: said in the metrics, the head's
  /// curve ends there, and every actor of `actors` sent its final report
  /// (listed with its edges), trained its share once and fewer steps than
  /// the 3 epochs.
  static void expect_stopped_after_one_epoch(const nlohmann::json& m,
                                             const std::set<std::string>& actors) {
    ASSERT_TRUE(m.contains("stopped")) << m.dump();
    EXPECT_EQ(m.at("stopped").at("epoch"), 1); // from 1, as the log and the epochs number it
    EXPECT_GE(m.at("stopped").at("test_accuracy").get<double>(), 0.02);
    ASSERT_EQ(m.at("heads").size(), 1u);
    const auto& epochs = m.at("heads")[0].at("epochs");
    ASSERT_FALSE(epochs.empty());
    EXPECT_LT(epochs.size(), 3u);
    EXPECT_EQ(epochs[0].at("seconds"), m.at("stopped").at("seconds"));
    std::set<std::string> reported;
    for (const auto& a : m.at("actors"))
      reported.insert(a.at("name").get<std::string>());
    EXPECT_EQ(reported, actors);
    for (const auto& [actor, count] : m.at("trained").items()) {
      EXPECT_GT(count.at("trained").get<int64_t>(), 0) << actor;
      EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    }
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

TEST_F(stop_at_accuracy, ist_stops_after_the_epoch_that_reaches_it) {
  auto m = run_job(*dir_, job("configs/ist.yaml", {"ist.hidden=[64]", "ist.local_steps=2", target}),
                   "ist");
  expect_stopped_after_one_epoch(m, {"worker.0", "worker.1", "shard.0", "shard.1"});
  for (const auto& a : m.at("actors"))
    if (a.at("role") == "ist_worker") // 3 rounds of 2 steps per epoch: 9 in 3 epochs
      EXPECT_LT(a.at("figures").at("rounds").get<double>(), 3 * 3) << a.dump();
}

TEST_F(stop_at_accuracy, resist_stops_after_the_epoch_that_reaches_it) {
  auto m = run_job(*dir_,
                   job("configs/resist.yaml",
                       {"data.synthetic_shape=[3, 16, 16]", "ist.local_steps=3", target}),
                   "resist");
  expect_stopped_after_one_epoch(m, {"worker.0", "worker.1", "shard.0", "shard.1"});
}

TEST_F(stop_at_accuracy, every_data_parallel_exchange_stops_over_node_processes) {
  for (const auto& exchange : {"data_parallel.sync_every=0", "data_parallel.sync_every=3"}) {
    auto m = run_job(*dir_,
                     with(job("configs/data-parallel.yaml",
                              {"data_parallel.model=convnet", exchange, target}),
                          {"--local-nodes", "2"}),
                     std::string{"ring-"} + exchange);
    expect_stopped_after_one_epoch(m, {"worker.0", "worker.1"});
    for (const auto& a : m.at("actors")) // 192 / (2 x 16) = 6 steps per epoch
      EXPECT_LT(a.at("figures").at("steps").get<double>(), 3 * 6) << exchange;
  }
  auto ps = run_job(*dir_,
                    job("configs/data-parallel.yaml", {"data_parallel.model=convnet",
                                                       "data_parallel.exchange=ps",
                                                       "data_parallel.shards=2", target}),
                    "ps");
  expect_stopped_after_one_epoch(ps, {"worker.0", "worker.1", "shard.0", "shard.1"});
}

// Without the key (or with an accuracy never reached) every epoch runs.
TEST_F(stop_at_accuracy, an_unreached_accuracy_runs_every_epoch) {
  auto m = run_job(*dir_,
                   job("configs/ist.yaml", {"ist.hidden=[64]", "ist.local_steps=2",
                                            "runtime.stop_at_accuracy=1"}),
                   "unreached");
  EXPECT_FALSE(m.contains("stopped"));
  EXPECT_EQ(m.at("heads")[0].at("epochs").size(), 3u);
}

// A source-driven job: the source ends the stream at a step boundary, and
// every stage (replicated, over node processes) and head finishes as at its
// end, each having trained the same steps.
TEST_F(stop_at_accuracy, pipeline_and_transfer_end_the_stream_at_a_step) {
  const std::vector<std::string> small{"--set", "data.train_limit=1024", "--set",
                                       "data.test_limit=128", "--set", "data.epochs=3", "--set",
                                       target};
  auto pipeline = run_job(*dir_,
                          with({"run", source_path("configs/pipeline.yaml"), "--set",
                                "data.microbatches=2", "--set", "pipeline.stages.1.replicas=2",
                                "--local-nodes", "2"},
                               small),
                          "pipeline");
  expect_stopped_after_one_epoch(
    pipeline, {"source", "stage0", "stage1.0", "stage1.1", "stage2"});
  const auto& trained = pipeline.at("trained");
  EXPECT_EQ(trained.at("stage1.0").at("trained").get<int64_t>() +
              trained.at("stage1.1").at("trained").get<int64_t>(),
            trained.at("stage0").at("trained").get<int64_t>());
  EXPECT_EQ(trained.at("stage2").at("trained"), trained.at("stage0").at("trained"));
  EXPECT_EQ(trained.at("stage0").at("trained").get<int64_t>() % 2, 0); // whole minibatches
  // Every head must reach it: the run stops once the last one has.
  auto transfer = run_job(
    *dir_, with({"run", source_path("configs/transfer.yaml"), "--set", "backbone.checkpoint=none"},
                small),
    "transfer");
  ASSERT_TRUE(transfer.contains("stopped")) << transfer.dump();
  EXPECT_EQ(transfer.at("heads").size(), 3u);
  for (const auto& head : transfer.at("heads")) {
    EXPECT_GE(head.at("epochs")[0].at("test_accuracy").get<double>(), 0.02);
    EXPECT_EQ(head.at("samples"), transfer.at("heads")[0].at("samples"));
  }
}

// `--mode local` stops as the actors' run does (after the epoch that reaches
// the target), so that compare measures its time to target as theirs.
TEST_F(stop_at_accuracy, the_local_pipeline_stops_after_the_epoch_that_reaches_it) {
  auto m = run_job(*dir_,
                   {"run", source_path("configs/pipeline.yaml"), "--mode", "local", "--set",
                    "data.train_limit=512", "--set", "data.test_limit=128", "--set",
                    "data.epochs=3", "--set", target},
                   "pipeline-local");
  ASSERT_TRUE(m.contains("stopped")) << m.dump();
  EXPECT_EQ(m.at("stopped").at("epoch"), 1);
  EXPECT_EQ(m.at("stopped").at("reason"), "stop_at_accuracy");
  const auto& epochs = m.at("heads")[0].at("epochs");
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_EQ(epochs[0].at("seconds"), m.at("stopped").at("seconds"));
}

TEST(stop_at_accuracy_config, refuses_an_accuracy_out_of_range) {
  for (const auto* bad : {"85", "0", "-0.1", "high"}) {
    auto out = run_baton({"run", source_path("configs/ist.yaml"), "--set",
                          std::string{"runtime.stop_at_accuracy="} + bad});
    EXPECT_NE(out.exit_code, 0) << bad;
    EXPECT_NE(out.text.find("must be a test accuracy in (0, 1]"), std::string::npos) << out.text;
  }
}
