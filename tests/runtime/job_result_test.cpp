// The metrics JSON of actors/runtime/job_result.hpp: per-actor time fractions and the
// round trip through job_result_from_json.

#include "actors/runtime/job_result.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using baton::actors::job_result;
using baton::actors::job_result_from_json;
using baton::actors::to_json;
using baton::messages::actor_report;

namespace {

actor_report actor(std::string name, double busy, double idle, double bubble) {
  actor_report x;
  x.actor = std::move(name);
  x.role = "stage";
  x.node = "node-a";
  x.busy_seconds = busy;
  x.idle_seconds = idle;
  x.bubble_seconds = bubble;
  x.edges = {{x.actor, "head-all", 10, 4096}};
  x.trace = {{"forward", 1718000000000000, 10, 0, 0}};
  return x;
}

} // namespace

TEST(job_result, actors_have_fractions_of_their_lifetime) {
  job_result r;
  r.actors = {actor("stage-1", 3.0, 1.0, 0.5), actor("never-started", 0, 0, 0)};
  auto j = to_json(r);
  const auto& a = j.at("actors").at(0);
  EXPECT_DOUBLE_EQ(a.at("busy_seconds").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(a.at("bubble_seconds").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(a.at("busy_fraction").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(a.at("idle_fraction").get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a.at("bubble_fraction").get<double>(), 0.125);
  // Bubble time is part of idle time: the fractions of busy and idle add up.
  EXPECT_DOUBLE_EQ(a.at("busy_fraction").get<double>() + a.at("idle_fraction").get<double>(), 1.0);
  const auto& idle = j.at("actors").at(1);
  EXPECT_EQ(idle.at("busy_fraction").get<double>(), 0.0);
  EXPECT_EQ(idle.at("idle_fraction").get<double>(), 0.0);
  EXPECT_EQ(idle.at("bubble_fraction").get<double>(), 0.0);
  // Bytes per edge stay; the trace is not part of the metrics.
  ASSERT_EQ(j.at("edges").size(), 2u);
  EXPECT_EQ(j.at("edges").at(0).at("bytes").get<int64_t>(), 4096);
  EXPECT_EQ(j.dump().find("trace"), std::string::npos);
  EXPECT_EQ(j.dump().find("forward"), std::string::npos);
}

TEST(job_result, bubble_seconds_survive_the_metrics_json) {
  job_result r;
  r.actors = {actor("stage-1", 3.0, 1.0, 0.5)};
  auto back = job_result_from_json(to_json(r));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->actors.size(), 1u);
  EXPECT_EQ(back->actors[0].bubble_seconds, 0.5);
  EXPECT_EQ(back->actors[0].edges.at(0).bytes, 4096);
  // Metrics written before bubble time existed still read.
  auto old = to_json(r);
  old["actors"][0].erase("bubble_seconds");
  back = job_result_from_json(old);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->actors[0].bubble_seconds, 0.0);
}

// Faults, restarts and the exactly-once counts survive the round trip (the
// benches read them back); a diverged run's NaN loss reads back as NaN.
TEST(job_result, faults_counts_and_nan_losses_round_trip) {
  job_result r;
  r.restarts = 2;
  r.faults = {{"kill_node", "n2", 6, 18, 160, 4}, {"throw", "stage1", 9, 0, 80, 8}};
  r.trained = {{"stage0", {64, 0}}, {"stage1", {64, 1}}};
  r.checkpoint_dir = "/tmp/x";
  actor_report head = actor("stage2", 1, 1, 0);
  head.role = "head";
  head.train_loss = std::numeric_limits<double>::quiet_NaN();
  head.weights_digest = "abc";
  r.heads = {head};
  auto back = job_result_from_json(nlohmann::json::parse(to_json(r).dump()));
  ASSERT_TRUE(back) << "read back failed";
  EXPECT_EQ(back->restarts, 2);
  ASSERT_EQ(back->faults.size(), 2u);
  EXPECT_EQ(back->faults[0].kind, "kill_node");
  EXPECT_EQ(back->faults[0].target, "n2");
  EXPECT_EQ(back->faults[0].detected_after_ms, 18);
  EXPECT_EQ(back->faults[1].restored_step, 8);
  ASSERT_EQ(back->trained.size(), 2u);
  EXPECT_EQ(back->trained.at("stage1").trained, 64);
  EXPECT_EQ(back->trained.at("stage1").duplicates, 1);
  EXPECT_EQ(back->checkpoint_dir, "/tmp/x");
  ASSERT_EQ(back->heads.size(), 1u);
  EXPECT_TRUE(std::isnan(back->heads[0].train_loss));
}

// Issue 21 item 12: a failure whose detection latency is unknown (-1 in
// memory) has no detected_after_ms in the metrics, never -1 shown as a
// time, and reads back as unknown; a known one is written as it is.
TEST(job_result, an_unknown_detection_latency_is_left_out) {
  job_result r;
  r.faults = {{"node_lost", "n2", 6, -1, 160, 4}, {"node_lost", "n3", 9, 840, 80, 8}};
  auto j = to_json(r);
  ASSERT_EQ(j.at("faults").size(), 2u);
  EXPECT_FALSE(j.at("faults")[0].contains("detected_after_ms")) << j.at("faults")[0].dump();
  EXPECT_EQ(j.at("faults")[1].at("detected_after_ms"), 840);
  auto back = job_result_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back) << "read back failed: " << j.dump();
  ASSERT_EQ(back->faults.size(), 2u);
  EXPECT_EQ(back->faults[0].detected_after_ms, -1);
  EXPECT_EQ(back->faults[0].recovered_after_ms, 160);
  EXPECT_EQ(back->faults[1].detected_after_ms, 840);
}

// The bench reads the training time and the stages' CPU figures back from
// each side's metrics JSON; actors that do not measure CPU write none.
TEST(job_result, train_seconds_and_stage_cpu_round_trip) {
  job_result r;
  r.wall_seconds = 7.5;
  r.train_seconds = 6.25;
  auto stage = actor("stage0", 3.0, 1.0, 0.5);
  stage.compute_cpu_seconds = 2.75;
  stage.process_cpu_seconds = 2.875;
  r.actors = {stage, actor("source", 0.1, 6.0, 0)};
  auto j = to_json(r);
  EXPECT_FALSE(j.at("actors").at(1).contains("compute_cpu_seconds"));
  auto back = job_result_from_json(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->wall_seconds, 7.5);
  EXPECT_EQ(back->train_seconds, 6.25);
  EXPECT_EQ(back->actors.at(0).compute_cpu_seconds, 2.75);
  EXPECT_EQ(back->actors.at(0).process_cpu_seconds, 2.875);
  EXPECT_EQ(back->actors.at(1).process_cpu_seconds, 0.0);
}

// What the plan settled (a pipeline's stages) is written when there is any
// and read back; a run without it has no "settled".
TEST(job_result, what_the_plan_settled_round_trips) {
  job_result r;
  r.wall_seconds = 1;
  EXPECT_FALSE(to_json(r).contains("settled"));
  r.settled = {"pipeline.stages=[{last_layer: pool3}, {last_layer: fc2}]"};
  auto j = to_json(r);
  ASSERT_TRUE(j.contains("settled"));
  auto back = job_result_from_json(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->settled, r.settled);
}

// Role-specific figures come back by name; events that are JSON objects are
// embedded as objects and read back as their compact text.
TEST(job_result, figures_and_events_round_trip) {
  job_result r;
  auto worker = actor("worker.0", 3.0, 1.0, 0);
  worker.figures = {{"backward_seconds", 1.5}, {"cache_hits", 640}};
  worker.events = {R"({"layer":"pool1","step":40})", "plain text"};
  r.actors = {worker, actor("source", 0.1, 6.0, 0)};
  auto j = to_json(r);
  EXPECT_EQ(j.at("actors").at(0).at("figures").at("cache_hits"), 640);
  EXPECT_EQ(j.at("actors").at(0).at("events").at(0).at("layer"), "pool1");
  EXPECT_FALSE(j.at("actors").at(1).contains("figures"));
  auto back = job_result_from_json(j);
  ASSERT_TRUE(back);
  const auto& w = back->actors.at(0);
  ASSERT_EQ(w.figures.size(), 2u);
  EXPECT_EQ(w.figures[0].name, "backward_seconds");
  EXPECT_EQ(w.figures[1].value, 640);
  EXPECT_EQ(w.events, worker.events);
}

// The seconds and bytes of each head's epochs go into its epochs (numbered
// from 1) and come back.
TEST(job_result, epoch_seconds_and_bytes_round_trip) {
  job_result r;
  auto head = actor("workers", 3.0, 1.0, 0);
  head.epochs = {{0, 0.5, 0.8, 64}, {1, 0.4, 0.85, 64}};
  r.heads = {head};
  r.epoch_seconds["workers"] = {{0, 1.25}, {1, 2.5}};
  r.epoch_bytes["workers"] = {{0, 4096}, {1, 8192}};
  auto j = to_json(r);
  EXPECT_EQ(j.at("heads").at(0).at("epochs").at(1).at("epoch"), 2);
  EXPECT_EQ(j.at("heads").at(0).at("epochs").at(1).at("seconds"), 2.5);
  EXPECT_EQ(j.at("heads").at(0).at("epochs").at(1).at("bytes_sent"), 8192);
  auto back = job_result_from_json(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->epoch_seconds, r.epoch_seconds);
  EXPECT_EQ(back->epoch_bytes, r.epoch_bytes);
}

// A run stopped at runtime.stop_at_accuracy says so in the metrics and the
// table; one that ran every epoch has no "stopped".
TEST(job_result, an_early_stop_round_trips_and_is_in_the_table) {
  job_result r;
  EXPECT_FALSE(to_json(r).contains("stopped"));
  r.stopped = baton::actors::early_stop{"workers", 2, 0.86, 12.5};
  auto back = job_result_from_json(nlohmann::json::parse(to_json(r).dump()));
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->stopped);
  EXPECT_EQ(back->stopped->actor, "workers");
  EXPECT_EQ(back->stopped->epoch, 2);
  EXPECT_EQ(back->stopped->test_accuracy, 0.86);
  EXPECT_EQ(back->stopped->seconds, 12.5);
  EXPECT_NE(baton::actors::results_table(r).find(
              "stopped after epoch 3: workers reached 86.00% at 12.5 s"),
            std::string::npos)
    << baton::actors::results_table(r);
}

TEST(job_result, the_steady_training_is_the_first_rows_samples_in_the_reporter_s_share) {
  job_result r;
  actor_report workers;
  workers.actor = "workers";
  workers.samples = 8192; // two workers' 4,096 each
  r.heads = {workers};
  r.actors = {actor("worker0", 1, 0, 0), actor("worker1", 1, 0, 0)};
  r.actors[0].samples = 4096;
  // worker0 trained 2,048 of its 4,096 samples steadily: half the row's.
  auto steady = baton::actors::steady_of(r, "worker0", 2048, 3.0);
  ASSERT_TRUE(steady.has_value());
  EXPECT_EQ(steady->samples, 4096);
  EXPECT_DOUBLE_EQ(steady->seconds, 3.0);
  // Unset for nothing trained between, more than the actor trained, an
  // unknown actor, and after a restart.
  EXPECT_FALSE(baton::actors::steady_of(r, "worker0", 0, 3.0).has_value());
  EXPECT_FALSE(baton::actors::steady_of(r, "worker0", 5000, 3.0).has_value());
  EXPECT_FALSE(baton::actors::steady_of(r, "worker9", 10, 3.0).has_value());
  r.restarts = 1;
  EXPECT_FALSE(baton::actors::steady_of(r, "worker0", 2048, 3.0).has_value());

  r.restarts = 0;
  r.steady = steady;
  auto back = job_result_from_json(to_json(r));
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->steady.has_value());
  EXPECT_EQ(back->steady->samples, 4096);
  EXPECT_DOUBLE_EQ(back->steady->seconds, 3.0);
  r.steady.reset();
  EXPECT_FALSE(to_json(r).contains("steady"));
}
