// A node process killed from outside (SIGKILL, as the OOM killer or a lost
// machine would) in the middle of a real `baton run --local-nodes 3`
// (issue 23 item 5). Without runtime.checkpoint_every the run does not
// start again from the initial weights behind the user's back: it fails
// with exit 2 and an error that says how to make it survive
// (runtime.checkpoint_every), and keeps the epochs it completed in the
// metrics and the curves. With checkpoints the same kill is recovered from.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/baton_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

/// The child process of `parent` started as `baton node --name NAME`; -1
/// when there is none (every thread's children: /proc/PID/task/T/children).
pid_t node_process_named(pid_t parent, const std::string& name) {
  const auto tasks = "/proc/" + std::to_string(parent) + "/task";
  std::error_code ec;
  for (const auto& task : fs::directory_iterator{tasks, ec}) {
    std::ifstream children{task.path() / "children"};
    for (pid_t child; children >> child;)
      if (contains(read_text("/proc/" + std::to_string(child) + "/cmdline"),
                   std::string{"--name"} + '\0' + name + '\0'))
        return child;
  }
  return -1;
}

class lost_node : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("lost-node"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// A gpipe pipeline over 3 local node processes (n2 holds a stage), 3
  /// epochs of 32 steps: several seconds an epoch here.
  static std::vector<std::string> job(const std::string& name, int checkpoint_every) {
    return {"run",   source_path("configs/pipeline.yaml"),
            "--set", "data.train_limit=2048",
            "--set", "data.test_limit=128",
            "--set", "data.epochs=3",
            "--set", "pipeline.schedule=gpipe",
            "--set", "runtime.checkpoint_every=" + std::to_string(checkpoint_every),
            "--local-nodes", "3",
            "--metrics-out", path_of(name + ".json"),
            "--curves", path_of(name + ".csv")};
  }
  static std::string path_of(const std::string& name) { return dir_->path() + "/" + name; }

  /// Waits for the end of epoch 1 and SIGKILLs node n2; false when the run
  /// ended first or n2 is not found.
  static bool kill_n2_after_epoch_1(baton_process& baton) {
    if (!baton.await_output("info epoch 1 stage2", 300s))
      return false;
    const pid_t n2 = node_process_named(baton.pid(), "n2");
    return n2 > 0 && ::kill(n2, SIGKILL) == 0;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

TEST_F(lost_node, without_checkpoints_the_run_fails_saying_how_to_survive_and_keeps_its_epochs) {
  baton_process baton{job("no-checkpoints", 0), path_of("no-checkpoints.log")};
  ASSERT_TRUE(kill_n2_after_epoch_1(baton)) << baton.output();
  EXPECT_EQ(baton.wait(), 2) << baton.output();
  const auto log = baton.output();
  EXPECT_TRUE(contains(log, "lost node 'n2'")) << log;
  EXPECT_TRUE(contains(log, "to survive a lost node, checkpoint every N steps with "
                            "runtime.checkpoint_every: N")) << log;
  EXPECT_FALSE(contains(log, "restarting the job")) << log;
  EXPECT_FALSE(contains(log, "info epoch 3 ")) << log;

  auto metrics = read_json(path_of("no-checkpoints.json"));
  ASSERT_FALSE(metrics.is_discarded()) << log;
  EXPECT_TRUE(contains(metrics.value("failed", ""), "runtime.checkpoint_every")) << metrics.dump();
  EXPECT_EQ(metrics.at("restarts"), 0);
  // Epoch 1 was complete before the kill: the run's result keeps it.
  ASSERT_EQ(metrics.at("heads").size(), 1u) << metrics.dump();
  const auto& epochs = metrics.at("heads")[0].at("epochs");
  ASSERT_GE(epochs.size(), 1u) << metrics.dump();
  EXPECT_EQ(epochs[0].at("epoch"), 1);
  EXPECT_EQ(epochs[0].at("samples"), 2048);
  EXPECT_TRUE(contains(read_text(path_of("no-checkpoints.csv")), "\npipeline,stage,stage2,1,"))
    << read_text(path_of("no-checkpoints.csv"));
}

TEST_F(lost_node, with_checkpoints_the_run_restarts_on_the_surviving_nodes) {
  baton_process baton{job("checkpoints", 4), path_of("checkpoints.log")};
  ASSERT_TRUE(kill_n2_after_epoch_1(baton)) << baton.output();
  EXPECT_EQ(baton.wait(), 0) << baton.output();
  const auto log = baton.output();
  EXPECT_TRUE(contains(log, "lost node 'n2'")) << log;
  EXPECT_TRUE(contains(log, "restarting the job from its checkpoints")) << log;

  auto metrics = read_json(path_of("checkpoints.json"));
  ASSERT_FALSE(metrics.is_discarded()) << log;
  EXPECT_FALSE(metrics.contains("failed")) << metrics.dump();
  EXPECT_GE(metrics.at("restarts").get<int>(), 1);
  ASSERT_FALSE(metrics.at("faults").empty());
  EXPECT_EQ(metrics.at("faults")[0].at("kind"), "node_lost");
  EXPECT_EQ(metrics.at("faults")[0].at("target"), "n2");
  // Restored from a checkpoint, not from the initial weights.
  EXPECT_GT(metrics.at("faults")[0].at("restored_step").get<int64_t>(), 0);
  const auto& epochs = metrics.at("heads")[0].at("epochs");
  ASSERT_EQ(epochs.size(), 3u) << metrics.dump();
  for (int e = 0; e < 3; ++e)
    EXPECT_EQ(epochs[e].at("epoch"), e + 1);
  for (const auto& a : metrics.at("actors"))
    EXPECT_NE(a.at("node"), "n2") << a.at("name");
}
