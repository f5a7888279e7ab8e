// Liveness and the stall detector (issue 21 items 3, 8 and 12): heartbeats
// carry each actor's step whatever runtime.progress_every is; the stall
// detector fires only when no actor advances, and names the actors with
// their steps and what they wait for; a lost node's detection latency is
// measured or left out; an error that recurs at the same step after a
// restart, with no fault injected, ends the run at once. Plain data first,
// then real `baton` processes.

#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/liveness.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/moments.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using baton::actors::fault_injector;
using baton::actors::fault_record;
using baton::actors::fault_spec;
using baton::actors::live_actor;
using baton::actors::liveness;
using baton::actors::recovered_text;
using namespace baton::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// -- liveness as plain data ------------------------------------------------------------

// A heartbeat whose step and work did not grow shows the actor alive, not
// the job advancing: the stall timeout runs on.
TEST(liveness, heartbeats_that_do_not_advance_do_not_keep_the_job_alive) {
  liveness live;
  live.start(moment(0));
  EXPECT_FALSE(live.stalled(3s, moment(2900)));
  live.heard("worker0", "n1", 5, 10, "", moment(500));
  EXPECT_FALSE(live.stalled(3s, moment(3400)));
  live.heard("worker0", "n1", 5, 10, "ring chunks", moment(3000));
  EXPECT_TRUE(live.stalled(3s, moment(3600)));
  live.heard("worker0", "n1", 5, 11, "", moment(3700)); // a piece of work, same step
  EXPECT_FALSE(live.stalled(3s, moment(3800)));
  EXPECT_EQ(live.step_of("worker0"), 5);
  EXPECT_EQ(live.step_of("worker1"), -1);
}

// Reports (progress, epochs, final reports) show the job advancing too.
TEST(liveness, a_report_counts_as_advancing) {
  liveness live;
  live.start(moment(0));
  live.reported("n1", moment(2500));
  EXPECT_FALSE(live.stalled(3s, moment(5000)));
  EXPECT_TRUE(live.stalled(3s, moment(5600)));
}

// The stall report names every unfinished actor with its step: one that
// answered the heartbeat request with what it waits for, one that did not
// answer (busy or hung), one never heard from.
TEST(liveness, the_stall_report_names_each_actor_its_step_and_what_it_waits_for) {
  liveness live;
  live.start(moment(0));
  live.heard("stage0", "n1", 4, 20, "", moment(1000));
  live.heard("stage1", "n2", 4, 22, "", moment(1000));
  live.asking(moment(5000));
  live.heard("stage0", "n1", 4, 20, "credits from stage1 (2 in flight)", moment(5100));
  std::vector<live_actor> actors{{"source", "embedded"}, {"stage0", "n1"}, {"stage1", "n2"}};
  EXPECT_FALSE(live.all_answered(actors));
  EXPECT_TRUE(live.all_answered({{"stage0", "n1"}}));
  auto report = live.stall_report(actors, 3s, moment(6000));
  EXPECT_TRUE(contains(report, "for 3000 ms (runtime.stall_timeout_ms)")) << report;
  EXPECT_TRUE(contains(report, "stage0 on n1 at step 4 (advanced 5.0 s ago): waiting for "
                               "credits from stage1 (2 in flight)"))
    << report;
  EXPECT_TRUE(contains(report, "stage1 on n2 at step 4 (advanced 5.0 s ago): no answer to a "
                               "heartbeat request (busy in one computation, or hung"))
    << report;
  EXPECT_TRUE(contains(report, "source: no heartbeat since the pass began")) << report;
}

// When a node was last heard from survives a new pass (a node lost later
// is measured from it); a node never heard from has no time.
TEST(liveness, a_node_is_remembered_across_passes) {
  liveness live;
  live.start(moment(0));
  live.heard("stage1", "n2", 1, 1, "", moment(100));
  live.start(moment(200));
  ASSERT_TRUE(live.last_heard_from("n2").has_value());
  EXPECT_EQ(*live.last_heard_from("n2"), moment(100));
  EXPECT_FALSE(live.last_heard_from("n9").has_value());
  EXPECT_EQ(live.step_of("stage1"), -1) << "a new pass's actors are new";
}

// -- recurring errors and detection latency (fault_injector) ---------------------------

// The same actor, code and step a second time is a recurrence; another
// step, actor or code is not.
TEST(liveness, an_error_recurs_at_the_same_step_of_the_same_actor) {
  fault_injector faults;
  EXPECT_FALSE(faults.recurs("worker0", 10, 0));
  EXPECT_TRUE(faults.recurs("worker0", 10, 0));
  EXPECT_FALSE(faults.recurs("worker0", 10, 1));
  EXPECT_FALSE(faults.recurs("worker1", 10, 0));
  EXPECT_FALSE(faults.recurs("worker0", 11, 0));
}

// A throw that fired explains its actor's failure until it is counted; it
// never explains another actor's.
TEST(liveness, an_injected_throw_explains_its_actor_until_counted) {
  fault_spec f;
  f.kind = "throw";
  f.actor = "stage1";
  f.at_step = 9;
  fault_injector faults{{f}};
  EXPECT_FALSE(faults.explains("stage1")) << "not fired yet";
  EXPECT_EQ(faults.throw_step_for("stage1"), 9);
  EXPECT_TRUE(faults.explains("stage1"));
  EXPECT_FALSE(faults.explains("stage0"));
  EXPECT_TRUE(faults.explain("stage1", moment(0)).has_value());
  EXPECT_FALSE(faults.explains("stage1"));
}

// Issue 21 item 12: an unknown detection time is left out of the line,
// never shown as "-1 ms"; a lost node's is counted from its last heartbeat.
TEST(liveness, the_recovery_line_never_shows_an_unknown_detection_time) {
  EXPECT_EQ(recovered_text(fault_record{"node_lost", "n2", 6, -1, 160, 4}),
            "recovered from node_lost of 'n2' in 160 ms");
  EXPECT_EQ(recovered_text(fault_record{"node_lost", "n2", 6, 840, 160, 4}),
            "recovered from node_lost of 'n2' in 160 ms (detected 840 ms after its last "
            "heartbeat)");
  EXPECT_EQ(recovered_text(fault_record{"stalled", "job", 6, 3120, 90, 4}),
            "recovered from stalled of 'job' in 90 ms (detected 3120 ms after the job last "
            "advanced)");
  EXPECT_EQ(recovered_text(fault_record{"kill_node", "n2", 6, 35, 812, 4}),
            "recovered from kill_node of 'n2' in 812 ms (detected after 35 ms)");
}

// -- end to end: real baton processes ------------------------------------------------

namespace {

class liveness_runs : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("liveness"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// One data-parallel worker training the mlp in minibatches of 2, with
  /// progress lines practically never and a 3 s stall timeout: a slow,
  /// healthy run that lasts longer than the timeout.
  static std::vector<std::string> slow_worker_job() {
    return {"run",   source_path("configs/data-parallel.yaml"),
            "--set", "data_parallel.workers=1",
            "--set", "data_parallel.model=mlp",
            "--set", "data.batch_size=2",
            "--set", "data.train_limit=256",
            "--set", "data.test_limit=200",
            "--set", "data.epochs=1",
            "--set", "runtime.progress_every=1000000",
            "--set", "runtime.stall_timeout_ms=3000"};
  }

  /// A short gpipe pipeline over three local node processes, a checkpoint
  /// every 4 steps and a 3 s stall timeout; the nodes' connection timeout is
  /// long, so that a paused node is found by the stall detector.
  static std::vector<std::string> pipeline_on_nodes() {
    return with(short_pipeline_job(), {"--set", "runtime.stall_timeout_ms=3000",
                                       "--set", "runtime.connection_timeout_ms=30000",
                                       "--local-nodes", "3"});
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

/// The stall line of `text` (from "no actor advanced" to the line's end).
std::string stall_line(const std::string& text) {
  auto at = text.find("no actor advanced");
  if (at == std::string::npos)
    return {};
  return text.substr(at, text.find('\n', at) - at);
}

} // namespace

// Issue 21 item 3: liveness does not depend on runtime.progress_every. One
// worker sends no progress line and no epoch report for longer than the
// stall timeout, and its heartbeats keep the run alive: no stall, no restart.
TEST_F(liveness_runs, a_slow_healthy_run_without_progress_lines_is_not_stalled) {
  auto metrics = run_job(*dir_, slow_worker_job(), "slow-worker");
  EXPECT_EQ(metrics.at("restarts"), 0);
  EXPECT_EQ(metrics.at("faults").size(), 0u);
  // The case tests something only when the run outlasted the stall timeout.
  EXPECT_GT(metrics.at("train_seconds").get<double>(), 3.0);
}

// Issue 21 item 3: a node paused (SIGSTOP) for 8 s hangs its actors; the
// others stop advancing, waiting. The stall message names the paused
// node's actors as not answering, the others with what they wait for; the
// job then restarts from its checkpoints and ends.
TEST_F(liveness_runs, the_stall_message_names_the_actors_that_stopped) {
  auto out = run_baton(with(pipeline_on_nodes(),
                            {"--fault", "kind=stop_node,node=n2,at_step=6,stopped_ms=8000"}));
  EXPECT_EQ(out.exit_code, 0) << out.text;
  auto line = stall_line(out.text);
  ASSERT_FALSE(line.empty()) << out.text;
  EXPECT_TRUE(contains(line, "for 3000 ms (runtime.stall_timeout_ms)")) << line;
  // Every actor on n2 did not answer; every other one says what it waits for.
  size_t named = 0;
  for (size_t at = line.find(" on n"); at != std::string::npos; at = line.find(" on n", at + 1)) {
    auto end = line.find(';', at);
    auto part = line.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (contains(part, " on n2")) {
      EXPECT_TRUE(contains(part, "no answer to a heartbeat request")) << part;
    } else {
      EXPECT_TRUE(contains(part, "waiting for ")) << part;
      EXPECT_TRUE(contains(part, " at step ")) << part;
    }
    named += 1;
  }
  EXPECT_GE(named, 3u) << line;
  EXPECT_TRUE(contains(line, " on n2")) << line;
  std::printf("the stall message: %s\n", line.c_str());
}

// Issue 21 item 8: an error that recurs at the same step after a restart,
// with no fault injected, ends the run at once instead of using up
// runtime.max_restarts. A worker's checkpoint directory that is a file:
// its first checkpoint fails, and again after the restart.
TEST_F(liveness_runs, an_error_that_recurs_at_the_same_step_is_not_retried) {
  auto checkpoints = dir_->path() + "/blocked-checkpoints";
  fs::create_directories(checkpoints);
  for (const auto* worker : {"worker0", "worker.0"}) // the actor's name, before and after issue 21
    std::ofstream{checkpoints + "/" + worker} << "not a directory\n";
  auto out = run_baton({"run",   source_path("configs/data-parallel.yaml"),
                        "--set", "data_parallel.workers=1",
                        "--set", "data_parallel.model=mlp",
                        "--set", "data.train_limit=256",
                        "--set", "data.test_limit=64",
                        "--set", "data.epochs=1",
                        "--set", "runtime.checkpoint_every=2",
                        "--set", "runtime.max_restarts=5",
                        "--set", "runtime.checkpoint_dir=" + checkpoints});
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_TRUE(contains(out.text, "recurred at step 2 after a restart")) << out.text;
  EXPECT_TRUE(contains(out.text, "not retried")) << out.text;
  EXPECT_TRUE(contains(out.text, "restart 1 of at most 5")) << out.text;
  EXPECT_FALSE(contains(out.text, "restart 2 of at most 5")) << out.text;
}
