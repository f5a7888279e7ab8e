// Slow nodes are not lost nodes (issue 21 items 4 and 5): the coordinator's
// node watch (actors/runtime/node_watch.hpp) as plain data, then real
// `baton run --local-nodes 2` processes with real signals: a worker's node
// SIGSTOPped longer than runtime.connection_timeout_ms under bounded
// staleness, the coordinator itself SIGSTOPped, and Ctrl-Z (SIGTSTP), which
// stops the local nodes with the coordinator.

#include "actors/runtime/node_watch.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/baton_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/moments.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using baton::actors::liveness_event;
using baton::actors::liveness_limits;
using baton::actors::node_liveness;
using namespace baton::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

liveness_limits limits(std::chrono::milliseconds late, std::chrono::milliseconds lost) {
  liveness_limits l;
  l.interval = 200ms;
  l.late = late;
  l.lost = lost;
  l.report_every = 5000ms;
  return l;
}

/// Ticks every 200 ms from `from` to `to` (exclusive), `n2` answering
/// never, `n1` at every tick; the events.
std::vector<liveness_event> run_ticks(node_liveness& w, int64_t from, int64_t to) {
  std::vector<liveness_event> events;
  for (int64_t t = from; t < to; t += 200) {
    std::chrono::milliseconds paused{0};
    for (auto& e : w.tick(moment(t), paused))
      events.push_back(e);
    w.heard("n1", moment(t + 1));
  }
  return events;
}

} // namespace

// -- the node watch as plain data -------------------------------------------------------

// A job that cannot recover: a silent node is late at `late`, warned about
// again every report_every, lost at `lost`, then no longer watched.
TEST(node_liveness, a_silent_node_is_late_then_lost_at_its_limits) {
  node_liveness w{limits(1000ms, 12000ms), moment(0)};
  w.add("n1", moment(0));
  w.add("n2", moment(0));
  auto events = run_ticks(w, 200, 13000);
  ASSERT_EQ(events.size(), 4u); // late at 1 s, again at 6 s and 11 s, lost at 12 s
  for (const auto& e : events) {
    EXPECT_EQ(e.node, "n2");
    EXPECT_FALSE(e.back);
  }
  EXPECT_EQ(events.front().silent, 1000ms);
  EXPECT_EQ(events.back().silent, 12000ms);
  EXPECT_EQ(w.watched(), std::vector<std::string>{"n1"});
}

// A late node that answers is back, with how long it was silent; a node
// heard in time yields nothing.
TEST(node_liveness, a_late_node_that_answers_is_back) {
  node_liveness w{limits(1000ms, 120000ms), moment(0)};
  w.add("n1", moment(0));
  w.add("n2", moment(0));
  EXPECT_TRUE(run_ticks(w, 200, 1000).empty());
  EXPECT_FALSE(w.heard("n2", moment(900)).has_value()); // in time
  EXPECT_TRUE(run_ticks(w, 1000, 2000).empty());
  auto late = run_ticks(w, 2000, 2200); // the tick at 2 s
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].silent, 1100ms);
  auto back = w.heard("n2", moment(4900));
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->back);
  EXPECT_EQ(back->silent, 4000ms);
  EXPECT_FALSE(w.heard("n2", moment(5000)).has_value());
}

// This process stood still (SIGSTOP, Ctrl-Z): a tick 15 s late. Nobody could
// be heard meanwhile, so no node is late or lost; each gets `late` anew.
TEST(node_liveness, a_pause_of_this_process_gives_every_node_a_fresh_limit) {
  node_liveness w{limits(1000ms, 1000ms), moment(0)};
  w.add("n1", moment(0));
  w.add("n2", moment(0));
  std::chrono::milliseconds paused{0};
  EXPECT_TRUE(w.tick(moment(200), paused).empty());
  EXPECT_EQ(paused, 0ms);
  EXPECT_TRUE(w.tick(moment(15200), paused).empty());
  EXPECT_EQ(paused, 15000ms);
  EXPECT_EQ(w.watched().size(), 2u);
  // A node that still does not answer is judged from the pause's end: lost
  // (this job recovers: late is lost) 1 s after it.
  EXPECT_TRUE(run_ticks(w, 15400, 16200).empty());
  auto lost = run_ticks(w, 16200, 16400);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node, "n2");
  EXPECT_EQ(w.watched(), std::vector<std::string>{"n1"});
}

// The limits of a topology: a job that recovers gives up at the connection
// timeout, one that cannot waits up to runtime.slow_node_timeout_ms; pings
// come at least four times per limit, whatever runtime.heartbeat_ms says.
TEST(node_liveness, limits_follow_the_topology) {
  baton::actors::topology t;
  t.runtime.heartbeat_interval = 5000ms;
  t.runtime.connection_timeout = 1000ms;
  t.runtime.slow_node_timeout = 30000ms;
  auto waits = baton::actors::liveness_limits_of(t);
  EXPECT_EQ(waits.interval, 250ms);
  EXPECT_EQ(waits.late, 1000ms);
  EXPECT_EQ(waits.lost, 30000ms);
  t.runtime.checkpoint_every = 4;
  auto recovers = baton::actors::liveness_limits_of(t);
  EXPECT_EQ(recovers.lost, 1000ms);
}

// -- real processes and signals --------------------------------------------------------

namespace {

/// The fields of /proc/PID/stat after the command: [0] state, [1] ppid.
std::vector<std::string> stat_of(pid_t pid) {
  auto text = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto end = text.rfind(')');
  std::vector<std::string> fields;
  if (end == std::string::npos)
    return fields;
  std::istringstream rest{text.substr(end + 1)};
  for (std::string f; rest >> f && fields.size() < 2;)
    fields.push_back(f);
  return fields;
}

/// The child of `parent` whose command line has `--name NAME`; -1 if none.
pid_t child_named(pid_t parent, const std::string& name) {
  for (const auto& entry : fs::directory_iterator{"/proc"}) {
    const auto pid_text = entry.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    auto stat = stat_of(pid);
    if (stat.size() < 2 || stat[1] != std::to_string(parent))
      continue;
    auto cmdline = read_text(entry.path().string() + "/cmdline");
    if (contains(cmdline, std::string{"--name"} + '\0' + name + '\0'))
      return pid;
  }
  return -1;
}

/// Whether process `pid` is stopped (state T).
bool stopped(pid_t pid) {
  auto stat = stat_of(pid);
  return !stat.empty() && stat[0] == "T";
}

/// Polls `ok` every 50 ms for up to `limit`; its last answer.
template <class Predicate>
bool wait_until(Predicate ok, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ok() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  return ok();
}

/// SIGCONTs `pid` when it goes, even when an assertion failed: a stopped
/// process would not act on the SIGTERM that ends it.
struct continue_at_end {
  pid_t pid;
  ~continue_at_end() {
    if (pid > 0)
      ::kill(pid, SIGCONT);
  }
};

class stragglers : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("straggler"); }
  static void TearDownTestSuite() { dir_.reset(); }

  /// Data-parallel with the parameter server over 2 local node processes
  /// (n2 holds a worker, n1 the other). A node silent for 1 s is
  /// late; synthetic data, 4 epochs of 64 steps (about 13 s of training
  /// here): long enough to be paused in the middle.
  static std::vector<std::string> ps_job(int32_t max_staleness, const std::string& name) {
    return {"run",   source_path("configs/data-parallel.yaml"),
            "--set", "data.dataset=synthetic",
            "--set", "data.synthetic_train=2048",
            "--set", "data.synthetic_test=64",
            "--set", "data.batch_size=16",
            "--set", "data.epochs=4",
            "--set", "data_parallel.model=convnet",
            "--set", "data_parallel.workers=2",
            "--set", "data_parallel.exchange=ps",
            "--set", "data_parallel.shards=1",
            "--set", "data_parallel.max_staleness=" + std::to_string(max_staleness),
            "--set", "runtime.compute_threads=1",
            "--set", "runtime.connection_timeout_ms=1000",
            "--local-nodes", "2",
            "--metrics-out", metrics_of(name)};
  }

  static std::string metrics_of(const std::string& name) {
    return dir_->path() + "/" + name + ".json";
  }
  static std::string log_of(const std::string& name) { return dir_->path() + "/" + name + ".log"; }

  /// Waits until node `node` of the run `baton` has spawned its actors
  /// (its log, in the directory the run names, says so) and trains a
  /// second: the node's pid, -1 when it never got there.
  static pid_t await_training(baton_process& baton, const std::string& node) {
    const std::string named = "(logs in ";
    std::string node_log;
    wait_until([&] {
      auto log = baton.output();
      auto at = log.find(named);
      if (at != std::string::npos)
        node_log = log.substr(at + named.size(),
                              log.find(',', at) - at - named.size()) + "/" + node + ".log";
      return !node_log.empty() || !baton.running();
    }, 120s);
    wait_until([&] { return contains(read_text(node_log), "spawned") || !baton.running(); }, 120s);
    std::this_thread::sleep_for(1s);
    return baton.running() ? child_named(baton.pid(), node) : -1;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// Item 4: bounded staleness (max_staleness 2), node n2 SIGSTOPped for
// 4 s, four times runtime.connection_timeout_ms. The node is slow, not gone
// (its connection stays open): the coordinator warns, naming it and how long
// it has been silent, waits, and the run ends with exit 0, its metrics, and
// every sample trained once. Before, it ended after ~2 s with exit 2 and
// `lost node 'n2'`.
TEST_F(stragglers, a_stopped_worker_node_under_bounded_staleness_is_waited_for) {
  baton_process baton{ps_job(2, "ps-straggler"), log_of("ps-straggler")};
  pid_t n2 = await_training(baton, "n2");
  ASSERT_GT(n2, 0) << baton.output();
  ASSERT_TRUE(baton.running()) << baton.output();
  {
    continue_at_end resume{n2};
    ASSERT_EQ(::kill(n2, SIGSTOP), 0);
    std::this_thread::sleep_for(4s);
  }
  EXPECT_EQ(baton.wait(), 0) << baton.output();
  auto log = baton.output();
  EXPECT_TRUE(contains(log, "node 'n2' has not answered for")) << log;
  EXPECT_TRUE(contains(log, "runtime.slow_node_timeout_ms")) << log;
  EXPECT_TRUE(contains(log, "node 'n2' answers again after")) << log;
  EXPECT_FALSE(contains(log, "lost node '")) << log;
  auto metrics = read_json(metrics_of("ps-straggler"));
  ASSERT_FALSE(metrics.is_discarded()) << log;
  EXPECT_EQ(metrics.at("restarts"), 0);
  int64_t trained = 0;
  for (const auto& [actor, count] : metrics.at("trained").items()) {
    EXPECT_EQ(count.at("duplicates").get<int64_t>(), 0) << actor;
    trained += count.at("trained").get<int64_t>();
  }
  EXPECT_EQ(trained, 2 * 4 * (1024 / 16)); // 2 workers x 4 epochs x 64 steps
}

// Item 4: the same straggler past runtime.slow_node_timeout_ms (2 s here)
// is lost. The run cannot recover (bounded staleness writes no
// checkpoints) and says why, but keeps the work done: the actors on n1 are
// stopped and report, the metrics are written with what failed, exit 2.
TEST_F(stragglers, a_worker_node_lost_under_bounded_staleness_keeps_the_work_done) {
  auto args = ps_job(2, "ps-lost");
  args.insert(args.end(), {"--set", "runtime.slow_node_timeout_ms=2000"});
  baton_process baton{args, log_of("ps-lost")};
  pid_t n2 = await_training(baton, "n2");
  ASSERT_GT(n2, 0) << baton.output();
  ASSERT_TRUE(baton.running()) << baton.output();
  continue_at_end resume{n2};
  ASSERT_EQ(::kill(n2, SIGSTOP), 0);
  EXPECT_EQ(baton.wait(), 2) << baton.output();
  auto log = baton.output();
  EXPECT_TRUE(contains(log, "lost node 'n2': no answer for")) << log;
  EXPECT_TRUE(contains(log, "no recovery: the run writes no checkpoints")) << log;
  auto metrics = read_json(metrics_of("ps-lost"));
  ASSERT_FALSE(metrics.is_discarded()) << log;
  EXPECT_TRUE(contains(metrics.value("failed", ""), "lost node 'n2'")) << metrics.dump();
  // The worker on n1 trained and reported, with its weights; n2's actors
  // could not.
  ASSERT_TRUE(metrics.contains("trained")) << metrics.dump();
  ASSERT_EQ(metrics.at("trained").size(), 1u) << metrics.dump();
  EXPECT_GT(metrics.at("trained").begin()->at("trained").get<int64_t>(), 0) << metrics.dump();
  EXPECT_EQ(digests_by_actor(metrics, "data_parallel_worker").size(), 1u) << metrics.dump();
}

// Item 5: the coordinator SIGSTOPped for 4 s (longer than
// runtime.connection_timeout_ms) in a job that recovers (checkpoints): no
// node may count as lost for the coordinator's own pause, and the local
// nodes keep their connections to it. Before, every node was lost (exit 2).
TEST_F(stragglers, a_paused_coordinator_keeps_its_local_nodes) {
  auto args = ps_job(0, "paused-coordinator");
  args.insert(args.end(), {"--set", "runtime.checkpoint_every=8"});
  baton_process baton{args, log_of("paused-coordinator")};
  pid_t n1 = await_training(baton, "n1");
  ASSERT_GT(n1, 0) << baton.output();
  ASSERT_TRUE(baton.running()) << baton.output();
  {
    continue_at_end resume{baton.pid()};
    ASSERT_EQ(::kill(baton.pid(), SIGSTOP), 0);
    std::this_thread::sleep_for(4s);
  }
  EXPECT_EQ(baton.wait(), 0) << baton.output();
  auto log = baton.output();
  EXPECT_TRUE(contains(log, "this process did not run for")) << log;
  EXPECT_FALSE(contains(log, "lost node '")) << log;
  EXPECT_FALSE(contains(log, "has not answered")) << log;
  auto metrics = read_json(metrics_of("paused-coordinator"));
  ASSERT_FALSE(metrics.is_discarded()) << log;
  EXPECT_EQ(metrics.at("restarts"), 0) << log;
}

// Item 5: Ctrl-Z (SIGTSTP) stops the coordinator and its local nodes, which
// are in process groups of their own; SIGCONT (`fg`) continues them all,
// and the run ends normally.
TEST_F(stragglers, ctrl_z_stops_the_local_nodes_with_the_coordinator) {
  baton_process baton{ps_job(0, "ctrl-z"), log_of("ctrl-z")};
  pid_t n1 = await_training(baton, "n1");
  pid_t n2 = child_named(baton.pid(), "n2");
  ASSERT_GT(n1, 0) << baton.output();
  ASSERT_GT(n2, 0) << baton.output();
  {
    continue_at_end resume{baton.pid()};
    ASSERT_EQ(::kill(baton.pid(), SIGTSTP), 0);
    EXPECT_TRUE(wait_until([&] { return stopped(baton.pid()) && stopped(n1) && stopped(n2); },
                           10s));
    std::this_thread::sleep_for(2s);
    EXPECT_TRUE(stopped(n1) && stopped(n2));
  }
  EXPECT_TRUE(wait_until([&] { return !stopped(n1) && !stopped(n2); }, 10s));
  EXPECT_EQ(baton.wait(), 0) << baton.output();
}
