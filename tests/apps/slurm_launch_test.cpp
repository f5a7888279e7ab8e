// `baton launch` under a real Slurm (issue 23, item 4): a single-host
// cluster from Debian's slurm-wlm and munge (slurmctld and slurmd on
// 127.0.0.1, started and stopped by the suite), `srun -n 3 baton launch` and
// the batch script of docs/running-on-a-cluster.md through `sbatch`, each
// ending with exit code 0 and the weights of the embedded `baton run` of the
// same topology, and a task killed under srun whose step the same srun
// resumes. Skipped, saying why, where the cluster cannot run: not
// root, the packages missing, or daemons that do not start.

#include <algorithm>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/slurm_cluster.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

/// The short pipeline job (1 epoch, 3 stages) as `baton launch` arguments:
/// `baton run`'s with `launch` in place of `run`.
std::vector<std::string> slurm_job() {
  auto args = short_pipeline_job(1);
  args.front() = "launch";
  return args;
}

/// The lines of `text`, sorted (the tasks of a step print in any order).
std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

/// The nodes that ran the actors of `metrics`.
std::set<std::string> nodes_of(const nlohmann::json& metrics) {
  std::set<std::string> out;
  for (const auto& actor : metrics.at("actors"))
    out.insert(actor.at("node").get<std::string>());
  return out;
}

/// Expects the launched run's metrics to hold the embedded run's weights and
/// accuracy, its actors spread over the 3 ranks' nodes.
void expect_same_run(const nlohmann::json& launched, const nlohmann::json& embedded) {
  ASSERT_FALSE(launched.is_discarded()) << "no metrics";
  EXPECT_EQ(digests_by_actor(launched), digests_by_actor(embedded));
  EXPECT_FALSE(digests_by_actor(embedded).empty());
  EXPECT_EQ(launched.at("heads").at(0).at("test_accuracy"),
            embedded.at("heads").at(0).at("test_accuracy"));
  EXPECT_EQ(nodes_of(launched).size(), 3u) << launched.at("actors").dump();
}

} // namespace

class slurm_launch : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (!slurm_unavailable().empty())
      return;
    dir_ = std::make_unique<scratch_dir>("slurm");
    cluster_ = std::make_unique<slurm_cluster>(dir_->path());
  }
  static void TearDownTestSuite() {
    cluster_.reset(); // the daemons stop before their directory goes
    dir_.reset();
  }
  void SetUp() override {
    if (auto why = slurm_unavailable(); !why.empty())
      GTEST_SKIP() << "no Slurm cluster here: " << why;
    if (!cluster_->up())
      GTEST_SKIP() << "the Slurm daemons did not come up: " << cluster_->failure();
  }
  /// Where the cluster's files are; a test's own files go there too.
  static const std::string& dir() { return dir_->path(); }
  /// The embedded run of the job, its metrics.
  static nlohmann::json embedded_run() {
    return run_job(*dir_, short_pipeline_job(1), "embedded");
  }

  static std::unique_ptr<scratch_dir> dir_;
  static std::unique_ptr<slurm_cluster> cluster_;
};

std::unique_ptr<scratch_dir> slurm_launch::dir_;
std::unique_ptr<slurm_cluster> slurm_launch::cluster_;

// The cluster itself: srun starts 3 tasks on the one node, each told its
// rank, the task count and the node list, which is what baton launch reads.
TEST_F(slurm_launch, srun_starts_three_tasks_that_know_their_rank) {
  auto out = cluster_->run("srun -n 3 bash -c 'echo $SLURM_PROCID $SLURM_NTASKS "
                           "$SLURM_JOB_NODELIST'",
                           120);
  ASSERT_EQ(out.exit_code, 0) << out.text << cluster_->logs();
  EXPECT_EQ(sorted_lines(out.text),
            (std::vector<std::string>{"0 3 localhost", "1 3 localhost", "2 3 localhost"}))
    << out.text;
}

// The case of the issue: `srun -n 3 baton launch`, every rank from Slurm's
// variables, ends with 0 and the embedded run's weights.
TEST_F(slurm_launch, srun_baton_launch_ends_with_the_weights_of_the_embedded_run) {
  auto embedded = embedded_run();
  const auto metrics = dir() + "/launched.json";
  const auto port = free_tcp_ports(1);
  ASSERT_EQ(port.size(), 1u);
  auto args = with(slurm_job(), {"--metrics-out", metrics, "--rendezvous-port",
                                  std::to_string(port[0])});
  auto out = cluster_->run("srun -n 3 " + baton_command(args), 180);
  ASSERT_EQ(out.exit_code, 0) << out.text << cluster_->logs();
  EXPECT_TRUE(contains(out.text, "SLURM_PROCID")) << "a rank not read from Slurm:\n" << out.text;
  expect_same_run(read_json(metrics), embedded);
}

// The batch script of docs/running-on-a-cluster.md, configs/slurm/baton.sbatch,
// through sbatch (its #SBATCH lines asking for 3 hosts overridden on the
// command line for this one-host cluster), this build's baton as BATON and
// the topology and the job's flags as the script's arguments.
TEST_F(slurm_launch, sbatch_runs_the_documented_batch_script) {
  auto embedded = embedded_run();
  const auto port = free_tcp_ports(1);
  ASSERT_EQ(port.size(), 1u);
  std::string command = "BATON=" + quote(BATON_BINARY) +
                        " sbatch --wait --nodes=1 --ntasks-per-node=3 --cpus-per-task=1 " +
                        quote(source_path("configs/slurm/baton.sbatch"));
  auto args = with(slurm_job(), {"--rendezvous-port", std::to_string(port[0])});
  for (auto arg = args.begin() + 1; arg != args.end(); ++arg) // after `launch`
    command += " " + quote(*arg);
  auto out = cluster_->run(command, 180);
  std::smatch job;
  ASSERT_TRUE(std::regex_search(out.text, job, std::regex{"Submitted batch job ([0-9]+)"}))
    << out.text << cluster_->logs();
  const auto id = job[1].str();
  const auto log = read_text(dir() + "/baton-" + id + ".out");
  ASSERT_EQ(out.exit_code, 0) << out.text << log << cluster_->logs();
  expect_same_run(read_json(dir() + "/metrics-" + id + ".json"), embedded);
  EXPECT_TRUE(contains(log, "SLURM_PROCID")) << log;
}

// A task SIGKILLed under srun once every stage has a checkpoint (stage2
// writes its step 8 last; every stage then has step 4): the two others end
// by themselves, srun fails; the same srun again resumes from the
// checkpoints and ends with the weights of the embedded run never killed.
TEST_F(slurm_launch, a_killed_task_ends_the_step_and_the_same_srun_resumes) {
  auto embedded = run_job(*dir_, short_pipeline_job(2), "embedded-2");
  const auto checkpoints = dir() + "/checkpoints";
  const auto metrics = dir() + "/resumed.json";
  const auto port = free_tcp_ports(1);
  ASSERT_EQ(port.size(), 1u);
  auto args = short_pipeline_job(2);
  args.front() = "launch";
  args = with(args, {"--set", "runtime.checkpoint_dir=" + checkpoints, "--metrics-out", metrics,
                     "--rendezvous-port", std::to_string(port[0])});
  // $$ is the shell that execs baton: task 1's baton itself.
  const auto task = "if [ \"$SLURM_PROCID\" = 1 ]; then (while [ ! -e " +
                    quote(checkpoints + "/stage2/step-000000000008.ckpt") +
                    " ]; do sleep 0.05; done; kill -KILL $$) & fi; exec " + baton_command(args);
  auto killed = cluster_->run("srun -n 3 bash -c " + quote(task), 180);
  EXPECT_NE(killed.exit_code, 0) << killed.text;
  EXPECT_TRUE(contains(killed.text, "lost rank 1 (its process ended)")) << killed.text;
  EXPECT_TRUE(contains(killed.text, "rank 0 ended the job with exit code 1")) << killed.text;
  auto resumed = cluster_->run("srun -n 3 " + baton_command(args), 180);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.text << cluster_->logs();
  EXPECT_TRUE(contains(resumed.text, "which did not finish: resuming it")) << resumed.text;
  expect_same_run(read_json(metrics), embedded);
}
