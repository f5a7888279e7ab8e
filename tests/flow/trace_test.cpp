// The trace module of actors/flow/trace.hpp: the recorder alone, and the Chrome
// trace written from actor reports, parsed back as a viewer would read it.

#include "actors/flow/trace.hpp"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "messages/errc.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace std::chrono_literals;
using baton::errc;
using baton::actors::chrome_trace;
using baton::actors::trace_recorder;
using baton::actors::write_chrome_trace;
using baton::messages::actor_report;
using baton::messages::trace_event;

namespace fs = std::filesystem;
using baton::testing::scratch_dir;

namespace {

int64_t system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

actor_report report(std::string actor, std::string node, std::vector<trace_event> trace) {
  actor_report x;
  x.actor = std::move(actor);
  x.role = "stage";
  x.node = std::move(node);
  x.trace = std::move(trace);
  return x;
}

/// Three actors on two nodes, events out of order across actors, a fourth
/// actor without events; the earliest event belongs to the last actor.
std::vector<actor_report> sample_reports() {
  constexpr int64_t t0 = 1718000000000000;
  return {report("source", "node-a", {{"send", t0 + 100, 20, 0, -1}, {"send", t0 + 900, 20, 1, -1}}),
          report("stage-1", "node-a", {{"forward", t0 + 300, 250, 0, 4},
                                       {"backward", t0 + 700, 400, 0, 4},
                                       {"step", t0 + 1100, 50, -1, 5}}),
          report("idle-actor", "node-b", {}),
          report("head-all", "node-b", {{"forward", t0 + 40, 100, 0, 4}, {"wait", t0, 0, -1, -1}})};
}

class chrome_trace_file : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Parses the file at `name` (fails the test on invalid JSON).
  nlohmann::json read(const std::string& name) const {
    std::ifstream in{path(name)};
    auto j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << name << " is not valid JSON";
    return j;
  }

  scratch_dir scratch_{"trace"};
  const fs::path dir_ = scratch_.path();
};

} // namespace

// -- trace_recorder ----------------------------------------------------------------

TEST(trace_recorder, records_nothing_when_disabled) {
  trace_recorder recorder{false};
  EXPECT_FALSE(recorder.enabled());
  auto t = trace_recorder::clock::now();
  recorder.record("forward", t, t + 1ms, 1, 0);
  EXPECT_TRUE(recorder.take().empty());
  EXPECT_EQ(recorder.dropped(), 0);
}

TEST(trace_recorder, records_in_order_in_system_clock_microseconds) {
  auto before = system_now_us();
  trace_recorder recorder{true};
  EXPECT_TRUE(recorder.enabled());
  auto t = trace_recorder::clock::now();
  recorder.record("forward", t, t + 1500us, 3, 7);
  recorder.record("backward", t + 2ms, t + 5ms, 3, 7);
  recorder.record("step", t + 5ms, t + 4ms, -1, 8); // end before start: duration 0
  auto after = system_now_us();
  auto events = recorder.take();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, "forward");
  EXPECT_EQ(events[1].kind, "backward");
  EXPECT_EQ(events[2].kind, "step");
  EXPECT_EQ(events[0].duration_us, 1500);
  EXPECT_EQ(events[1].duration_us, 3000);
  EXPECT_EQ(events[2].duration_us, 0);
  EXPECT_EQ(events[1].start_us - events[0].start_us, 2000);
  EXPECT_EQ(events[2].start_us - events[0].start_us, 5000);
  // Unix-epoch microseconds: the first event happened while the test ran.
  EXPECT_GE(events[0].start_us, before - 1000);
  EXPECT_LE(events[0].start_us, after + 1000);
  EXPECT_EQ(events[0].microbatch_id, 3);
  EXPECT_EQ(events[0].weight_version, 7);
  EXPECT_EQ(events[2].microbatch_id, -1);
  EXPECT_EQ(events[2].weight_version, 8);
  // take() hands everything over once.
  EXPECT_TRUE(recorder.take().empty());
  recorder.record("eval", t, t, 4, 8);
  EXPECT_EQ(recorder.take().size(), 1u);
}

TEST(trace_recorder, counts_events_beyond_its_limit_as_dropped) {
  trace_recorder recorder{true, 2};
  auto t = trace_recorder::clock::now();
  for (int i = 0; i < 5; ++i)
    recorder.record("forward", t, t + 1us, i, 0);
  auto events = recorder.take();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].microbatch_id, 1);
  EXPECT_EQ(recorder.dropped(), 3);
  // The limit holds per take(): a report at a time.
  recorder.record("forward", t, t, 9, 0);
  EXPECT_EQ(recorder.take().size(), 1u);
}

// -- Chrome trace ------------------------------------------------------------------

TEST_F(chrome_trace_file, parses_back_with_one_row_per_actor_grouped_by_node) {
  auto reports = sample_reports();
  auto err = write_chrome_trace(path("trace.json"), reports);
  ASSERT_FALSE(err) << baton::describe(err);
  EXPECT_FALSE(fs::exists(path("trace.json.tmp")));
  auto j = read("trace.json");
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  std::map<int64_t, std::string> processes;             // pid -> node
  std::map<std::string, std::pair<int64_t, int64_t>> rows; // actor -> (pid, tid)
  std::vector<nlohmann::json> complete;
  for (const auto& e : j["traceEvents"]) {
    auto ph = e.at("ph").get<std::string>();
    auto name = e.at("name").get<std::string>();
    if (ph == "M" && name == "process_name") {
      auto pid = e.at("pid").get<int64_t>();
      EXPECT_EQ(processes.count(pid), 0u) << "two names for pid " << pid;
      processes[pid] = e.at("args").at("name").get<std::string>();
    } else if (ph == "M" && name == "thread_name") {
      auto actor = e.at("args").at("name").get<std::string>();
      EXPECT_EQ(rows.count(actor), 0u) << "two rows for " << actor;
      rows[actor] = {e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()};
    } else if (ph == "X") {
      complete.push_back(e);
    }
  }
  // One process per node, one thread per actor (the idle one included),
  // each thread in the process of its node, no two threads alike.
  ASSERT_EQ(processes.size(), 2u);
  ASSERT_EQ(rows.size(), reports.size());
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (const auto& r : reports) {
    ASSERT_EQ(rows.count(r.actor), 1u) << r.actor;
    auto [pid, tid] = rows[r.actor];
    EXPECT_EQ(processes[pid], r.node) << r.actor;
    distinct.insert({pid, tid});
  }
  EXPECT_EQ(distinct.size(), reports.size());
  // Every event once, sorted, relative to the earliest (the head's "wait").
  ASSERT_EQ(complete.size(), 7u);
  int64_t previous = 0;
  for (const auto& e : complete) {
    auto ts = e.at("ts").get<int64_t>();
    EXPECT_GE(ts, 0);
    EXPECT_GE(ts, previous) << "events out of order";
    previous = ts;
    EXPECT_GE(e.at("dur").get<int64_t>(), 0);
    ASSERT_TRUE(e.contains("args"));
    EXPECT_TRUE(e["args"].contains("microbatch"));
    EXPECT_TRUE(e["args"].contains("version"));
  }
  EXPECT_EQ(complete.front().at("ts").get<int64_t>(), 0);
  EXPECT_EQ(complete.front().at("name"), "wait");
  EXPECT_EQ(complete.back().at("name"), "step");
  EXPECT_EQ(complete.back().at("ts").get<int64_t>(), 1100);
  EXPECT_EQ(complete.back().at("dur").get<int64_t>(), 50);
  EXPECT_EQ(complete.back().at("args").at("microbatch").get<int64_t>(), -1);
  EXPECT_EQ(complete.back().at("args").at("version").get<int64_t>(), 5);
  // Each event sits on the row of the actor that recorded it.
  auto stage_row = rows["stage-1"];
  for (const auto& e : complete)
    if (e.at("name") == "backward") {
      EXPECT_EQ(e.at("pid").get<int64_t>(), stage_row.first);
      EXPECT_EQ(e.at("tid").get<int64_t>(), stage_row.second);
      EXPECT_EQ(e.at("ts").get<int64_t>(), 700);
      EXPECT_EQ(e.at("args").at("microbatch").get<int64_t>(), 0);
      EXPECT_EQ(e.at("args").at("version").get<int64_t>(), 4);
    }
}

TEST(chrome_trace, without_events_has_only_the_rows) {
  std::vector<actor_report> reports{report("stage-1", "", {})};
  auto j = chrome_trace(reports);
  ASSERT_EQ(j["traceEvents"].size(), 3u); // process name, thread name, sort index
  for (const auto& e : j["traceEvents"])
    EXPECT_EQ(e.at("ph"), "M");
  EXPECT_EQ(chrome_trace({})["traceEvents"].size(), 0u);
}

TEST_F(chrome_trace_file, invalid_utf8_from_a_peer_is_written_not_thrown) {
  auto reports = sample_reports();
  reports[0].actor = "bad\xff\xfe name";
  reports[1].trace[0].kind = "for\xc3ward";
  auto err = write_chrome_trace(path("trace.json"), reports);
  ASSERT_FALSE(err) << baton::describe(err);
  EXPECT_EQ(read("trace.json")["traceEvents"].size(), 4u + 4u + 2u + 7u);
}

TEST_F(chrome_trace_file, an_unwritable_path_is_an_error_naming_it) {
  auto missing = path("no-such-dir/trace.json");
  auto err = write_chrome_trace(missing, sample_reports());
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == errc::bad_file) << baton::describe(err);
  EXPECT_NE(baton::describe(err).find(missing), std::string::npos) << baton::describe(err);
  // A directory in the way is refused before any temporary file is made
  // (model::replacement_refusal), and stays.
  fs::create_directory(path("taken"));
  err = write_chrome_trace(path("taken"), sample_reports());
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == errc::bad_file) << baton::describe(err);
  EXPECT_NE(baton::describe(err).find("it is a directory"), std::string::npos)
    << baton::describe(err);
  EXPECT_FALSE(fs::exists(path("taken.tmp")));
  EXPECT_TRUE(fs::is_directory(path("taken")));
}
