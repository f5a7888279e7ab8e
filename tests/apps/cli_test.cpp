// The `baton` command line itself: its help (every command listed, each
// command's own usage with `--help`) and what it refuses before anything
// runs (`baton run` started as several copies by a launcher).

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

// Issue 32, item 22: `baton help` lists every command, `compare` included,
// with today's --save-model (every strategy, a TorchScript module).
TEST(cli, help_lists_every_command_and_says_what_save_model_writes) {
  auto help = run_baton({"help"});
  EXPECT_EQ(help.exit_code, 0) << help.text;
  for (const auto* command : {"run", "pretrain", "node", "launch", "certs", "bench", "profile",
                              "plan", "compare", "predict", "report", "help", "--version"})
    EXPECT_TRUE(contains(help.text, std::string{"\n  baton "} + command)) << command;
  EXPECT_TRUE(contains(help.text, "--save-model FILE      save the trained model as a "
                                  "TorchScript module (every"))
    << help.text;
  EXPECT_FALSE(contains(help.text, "job: pipeline: save the trained model")) << help.text;
}

// Issue 32, item 22: `baton compare --help` (and `baton help compare`)
// print compare's usage, not the whole text.
TEST(cli, command_help_prints_that_commands_usage) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"compare", "--help"},
                                                                {"help", "compare"}}) {
    auto out = run_baton(args);
    EXPECT_EQ(out.exit_code, 0) << out.text;
    EXPECT_TRUE(contains(out.text, "baton compare WORKLOAD.yaml [--strategies LIST]")) << out.text;
    EXPECT_TRUE(contains(out.text, "--budget SECONDS")) << out.text;
    EXPECT_FALSE(contains(out.text, "baton run [TOPOLOGY.yaml]")) << out.text;
    EXPECT_TRUE(contains(out.text, "exit codes:")) << out.text;
  }
  auto launch = run_baton({"launch", "--help"});
  EXPECT_TRUE(contains(launch.text, "baton launch TOPOLOGY.yaml")) << launch.text;
  EXPECT_FALSE(contains(launch.text, "baton compare")) << launch.text;
  auto all = run_baton({"--help"});
  EXPECT_TRUE(contains(all.text, "baton run [TOPOLOGY.yaml]")) << all.text;
  EXPECT_TRUE(contains(all.text, "baton compare WORKLOAD.yaml")) << all.text;
}

// Issue 32, item 19: `torchrun ... baton run` (the PyTorch habit) ran the
// whole job in every copy, all writing the same outputs. `baton run` now
// refuses when a launcher says it started several copies, and points to
// `baton launch`; one copy (WORLD_SIZE=1) or an sbatch script (SLURM_NTASKS
// without a step) still runs.
TEST(cli, run_started_as_several_copies_by_a_launcher_is_refused) {
  const auto run = baton_command({"run", "--set", "data.epochs=1", "--set",
                                  "data.train_limit=64", "--set", "data.test_limit=64"});
  for (const auto* vars : {"RANK=1 WORLD_SIZE=3", "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2",
                           "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0",
                           "SLURM_STEP_NUM_TASKS=4"}) {
    auto out = run_shell(std::string{"env "} + vars + " " + run);
    EXPECT_EQ(out.exit_code, 2) << vars << "\n" << out.text;
    EXPECT_TRUE(contains(out.text, "run `baton launch TOPOLOGY.yaml` under the launcher"))
      << vars << "\n" << out.text;
  }
  auto pretrain = run_shell("env RANK=0 WORLD_SIZE=2 " + baton_command({"pretrain"}));
  EXPECT_EQ(pretrain.exit_code, 2) << pretrain.text;
  EXPECT_TRUE(contains(pretrain.text, "baton pretrain: WORLD_SIZE=2")) << pretrain.text;
}

TEST(cli, run_as_one_copy_or_in_a_batch_script_still_runs) {
  // A bad flag after the check: the run is not refused for its variables.
  for (const auto* vars : {"RANK=0 WORLD_SIZE=1", "SLURM_NTASKS=4 SLURM_JOB_ID=7"}) {
    auto out = run_shell(std::string{"env "} + vars + " " + baton_command({"run", "--no-such"}));
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_TRUE(contains(out.text, "unknown argument '--no-such'")) << vars << "\n" << out.text;
    EXPECT_FALSE(contains(out.text, "baton launch")) << vars << "\n" << out.text;
  }
}

// Issue 33: the benches' embedded sides and the data-parallel bench's rounds
// are named in the help; an embedded pipeline refuses a link it does not
// have (no node process to put on an emulated host) before it profiles
// anything, and no round is not a bench.
TEST(cli, bench_help_names_the_embedded_sides_and_an_embedded_pipeline_takes_no_link) {
  auto help = run_baton({"bench", "--help"});
  EXPECT_TRUE(contains(help.text, "[--side local-threads|ring|ring-serial|embedded|ps|local-sgd|ps-stale]"))
    << help.text;
  EXPECT_TRUE(contains(help.text, "[--link RATE[,DELAY] | --embedded]")) << help.text;
  auto out = run_baton({"bench", "pipeline", "--embedded", "--link", "1gbit"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_TRUE(contains(out.text, "--embedded has none")) << out.text;
  EXPECT_FALSE(contains(out.text, "profile of")) << out.text;
  // Rounds of the data-parallel bench: 1 to 20.
  EXPECT_TRUE(contains(help.text, "[--repeat N] [--link RATE[,DELAY]] [--set KEY=VALUE]..."))
    << help.text;
  auto none = run_baton({"bench", "data-parallel", "--repeat", "0"});
  EXPECT_EQ(none.exit_code, 2) << none.text;
  EXPECT_FALSE(contains(none.text, "run (a') local")) << none.text;
}

// Issue 33: the pipeline bench cuts its minibatches of 128 into 2, 4 or 8
// microbatches; any other count is refused before anything is profiled.
TEST(cli, bench_pipeline_takes_2_4_or_8_microbatches) {
  auto help = run_baton({"bench", "--help"});
  EXPECT_TRUE(contains(help.text, "[--microbatches 2|4|8]")) << help.text;
  for (const char* bad : {"3", "0", "16", "four"}) {
    auto out = run_baton({"bench", "pipeline", "--microbatches", bad});
    EXPECT_EQ(out.exit_code, 2) << bad << "\n" << out.text;
    EXPECT_TRUE(contains(out.text, "--microbatches")) << out.text;
    EXPECT_FALSE(contains(out.text, "profile of")) << out.text;
  }
}

// A hostile sweep of every command's flags (2026-12-06) found values that were
// taken as the flag left out, flags that silently won over an earlier one or
// were ignored by the command given them, and refusals that blamed a typo.
// Each is refused now, with what to do, before anything runs.
TEST(cli, flags_with_an_empty_value_twice_or_out_of_place_are_refused) {
  const auto config = source_path("configs/data-parallel.yaml");
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
    {{"run", config, "--metrics-out", ""}, "--metrics-out needs a value, got an empty one"},
    {{"run", "--resume", ""}, "--resume needs a value, got an empty one"},
    {{"run", config, "--metrics-out", "a.json", "--metrics-out", "b.json"},
     "--metrics-out is given twice"},
    {{"run", config, "--threads", "2"}, "--threads sets the torch threads of --mode local"},
    {{"run", config, "--only-head", "all10"}, "--only-head trains one head with --mode local"},
    {{"run", source_path("configs/transfer.yaml"), "--baseline", "separate", "--local-nodes",
      "2"},
     "--local-nodes runs the actors"},
    {{"pretrain", config, "--local-nodes", "2"}, "--local-nodes is not one of its options"},
    {{"pretrain", config}, "backbone.checkpoint is none: there is no file to pre-train"},
    {{"node", "--port", " 80"}, "--port expects a non-negative integer, got ' 80'"},
    {{"plan", "--profile", "p.json", "--machines", "100000"}, "from 1 to 1024"},
    {{"bench", "pipeline", "--repeat", "0"}, "bad value '0' for --repeat"}};
  for (const auto& [args, message] : refused) {
    auto out = run_baton(args);
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_TRUE(contains(out.text, message)) << message << " not in: " << out.text;
    EXPECT_FALSE(contains(out.text, "did you mean")) << out.text; // the flag is right
  }
  // Bytes of a binary file quoted in an error are escaped, not sent to the terminal.
  scratch_dir dir{"cli"};
  const auto junk = dir.path() + "/junk.yaml";
  std::ofstream(junk) << "job: \x1b[31mred\n";
  auto escaped = run_baton({"run", junk});
  EXPECT_EQ(escaped.exit_code, 2) << escaped.text;
  EXPECT_TRUE(contains(escaped.text, "\\x1b[31mred")) << escaped.text;
  EXPECT_FALSE(contains(escaped.text, "\x1b")) << escaped.text;
  auto help = run_baton({"help", "nosuch"});
  EXPECT_EQ(help.exit_code, 2) << help.text;
  EXPECT_TRUE(contains(help.text, "no command 'nosuch'")) << help.text;
  // A repeatable flag still repeats.
  auto sets = run_baton({"run", config, "--set", "data.train_limit=64", "--set",
                         "data.test_limit=32", "--set", "data.epochs=0"});
  EXPECT_FALSE(contains(sets.text, "given twice")) << sets.text;
}

// Mistakes each of these commands once found only after minutes of work (a
// profiled model, a whole bench side) or reported as another one (a TLS
// refusal for a host name that does not exist): refused first.
TEST(cli, a_mistake_in_a_flag_is_refused_before_any_work) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
    {{"predict", source_path("configs/pipeline.yaml"), "--profile", "nosuch.json"},
     "nosuch.json: cannot read the profile"},
    {{"bench", "transfer", "--backbone", "nosuch"}, "bad value 'nosuch' for --backbone"},
    {{"bench", "faults", "--kill-at", "128"}, "--kill-at 128: the run has 128 steps"},
    {{"launch", "--master-addr", "nosuch.invalid", "--rank", "1", "--world-size", "2",
      "--job-id", "x", source_path("configs/pipeline.yaml")},
     "rank 0's host 'nosuch.invalid'"}};
  for (const auto& [args, message] : refused) {
    auto out = run_baton(args);
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_TRUE(contains(out.text, message)) << message << " not in: " << out.text;
    EXPECT_FALSE(contains(out.text, "profiling")) << out.text;
  }
}
