// Where the step of a parallel bench side went (apps/bench/step_split): the
// fractions add up to 1, the waiting explained by unequal compute is
// imbalance, the CPU of crossing messages is counted once a process over the
// compute actors' lives, a transfer run's cores' time is split by its
// processes' CPU, and a run without the actors' figures has no split.

#include <gtest/gtest.h>

#include "apps/bench/step_split.hpp"

using namespace baton::apps;
using baton::actors::job_result;
using baton::messages::actor_report;

namespace {

actor_report stage(double busy, double bubble, const std::string& node) {
  actor_report a;
  a.role = "pipeline_stage";
  a.node = node;
  a.busy_seconds = busy;
  a.bubble_seconds = bubble;
  a.compute_cpu_seconds = busy;
  a.process_cpu_seconds = 1.1 * busy;
  return a;
}

actor_report worker(double forward, double backward, double step, double wait) {
  actor_report a;
  a.role = "data_parallel_worker";
  a.figures = {{"forward_seconds", forward}, {"backward_seconds", backward},
               {"exchange_wait_seconds", wait}, {"step_seconds", step},
               {"overlap_seconds", 5}};
  return a;
}

double sum(const step_split& s) {
  return s.compute + s.waiting + s.bubble + s.imbalance + s.overhead;
}

} // namespace

TEST(step_split, a_pipeline_splits_its_bubble_into_imbalance_and_the_schedule) {
  job_result r;
  r.train_seconds = 10;
  r.actors = {stage(8, 1, "n1"), stage(6, 3, "n2")}; // mean compute 7, the slowest 8; mean bubble 2
  auto s = split_of_pipeline(r);
  EXPECT_EQ(s.actors, 2);
  EXPECT_TRUE(s.stages);
  EXPECT_DOUBLE_EQ(s.compute, 0.7);
  EXPECT_DOUBLE_EQ(s.imbalance, 0.1);
  EXPECT_NEAR(s.bubble, 0.1, 1e-12);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_NEAR(s.overhead, 0.1, 1e-12);
  EXPECT_NEAR(sum(s), 1, 1e-12);
  EXPECT_NEAR(s.cpu_beyond_compute, 0.1, 1e-12);
}

TEST(step_split, stages_sharing_a_process_count_its_cpu_once) {
  job_result r;
  r.train_seconds = 10;
  // Embedded: both stages report their one process's CPU, 15.4 s of it.
  auto a = stage(8, 1, "embedded"), b = stage(6, 3, "embedded");
  a.process_cpu_seconds = b.process_cpu_seconds = 15.4;
  r.actors = {a, b};
  EXPECT_NEAR(split_of_pipeline(r).cpu_beyond_compute, 0.1, 1e-12);
}

TEST(step_split, serialisation_and_wire_count_each_process_once_over_the_actors_lives) {
  job_result r;
  r.train_seconds = 10;
  // Two processes; the second holds a stage and a source, which report the
  // same process's counters (the source began earlier: the widest is taken).
  auto first = stage(8, 1, "n1"), second = stage(6, 3, "n2");
  first.idle_seconds = 2;  // lives: 10 s each
  second.idle_seconds = 4;
  first.figures = {{"serialisation_cpu_seconds", 0.4}, {"wire_cpu_seconds", 0.2}};
  second.figures = {{"serialisation_cpu_seconds", 0.3}, {"wire_cpu_seconds", 0.1}};
  actor_report source;
  source.role = "source";
  source.node = "n2";
  source.busy_seconds = 20;
  source.figures = {{"serialisation_cpu_seconds", 0.8}, {"wire_cpu_seconds", 0.2}};
  r.actors = {first, second, source};
  auto s = split_of_pipeline(r);
  EXPECT_NEAR(s.serialisation, (0.4 + 0.8) / 20, 1e-12);
  EXPECT_NEAR(s.wire, (0.2 + 0.2) / 20, 1e-12);
  EXPECT_NEAR(sum(s), 1, 1e-12) << "the CPU of other threads is not a part of the step";
  EXPECT_NE(split_row("(b) 1f1b", 17, s).find("6.0%"), std::string::npos)
    << split_row("(b) 1f1b", 17, s);
  EXPECT_EQ(s.to_json().at("wire").get<double>(), s.wire);
  // In one process nothing crosses: no figures, 0.
  r.actors = {stage(8, 1, "embedded"), stage(6, 3, "embedded")};
  EXPECT_EQ(split_of_pipeline(r).serialisation, 0);
  EXPECT_EQ(split_of_pipeline(r).wire, 0);
}

TEST(step_split, data_parallel_workers_wait_for_the_exchange_and_the_imbalance_is_capped_by_it) {
  job_result r;
  r.train_seconds = 20;
  // Compute 10 and 14 s (mean 12, the slowest 2 above it); they waited 1 s
  // on average: all of it is put down to the imbalance, none to the wire.
  r.actors = {worker(2, 6, 2, 1.5), worker(3, 9, 2, 0.5)};
  auto s = split_of_data_parallel(r);
  EXPECT_EQ(s.actors, 2);
  EXPECT_FALSE(s.stages);
  EXPECT_DOUBLE_EQ(s.compute, 0.6);
  EXPECT_DOUBLE_EQ(s.imbalance, 0.05);
  EXPECT_NEAR(s.waiting, 0, 1e-12);
  EXPECT_EQ(s.bubble, 0);
  EXPECT_NEAR(s.overhead, 0.35, 1e-12);
  EXPECT_NEAR(sum(s), 1, 1e-12);
  EXPECT_LT(s.cpu_beyond_compute, 0) << "workers do not report their process's CPU";
  EXPECT_FALSE(s.to_json().contains("cpu_beyond_compute"));
}

TEST(step_split, a_transfer_run_splits_the_cores_time_and_lists_its_actors_busy) {
  job_result r;
  r.train_seconds = 10;
  baton::messages::node_report node;
  node.cpu_seconds = 18; // of 2 cores x 10 s
  r.nodes = {node};
  actor_report source, stage, head;
  source.role = "source";
  source.busy_seconds = 1;
  stage.actor = "stage0";
  stage.role = "stage";
  stage.busy_seconds = 9.5;
  stage.figures = {{"serialisation_cpu_seconds", 0.2}, {"wire_cpu_seconds", 0.1}};
  head.actor = "h1";
  head.role = "head";
  head.busy_seconds = 3;
  r.actors = {source, stage, head};
  auto s = split_of_transfer(r, 2);
  EXPECT_DOUBLE_EQ(s.used, 0.9);
  EXPECT_DOUBLE_EQ(s.serialisation, 0.01);
  EXPECT_DOUBLE_EQ(s.wire, 0.005);
  ASSERT_EQ(s.busy.size(), 2u) << "the source computes nothing of the model";
  EXPECT_EQ(s.text(), "cores used 90.0% (idle 10.0%), of them ser/copies 1.0%, wire 0.5%; "
                      "busy: stage0 95%, h1 30%");
  EXPECT_DOUBLE_EQ(s.to_json().at("busy").at("h1").get<double>(), 0.3);
  r.nodes.clear(); // no CPU reported: unknown, not 0% used
  EXPECT_LT(split_of_transfer(r, 2).used, 0);
  EXPECT_TRUE(split_of_transfer(r, 2).to_json().empty());
}

TEST(step_split, a_run_without_its_actors_figures_has_no_split) {
  job_result r;
  r.train_seconds = 5;
  actor_report source;
  source.role = "source";
  source.busy_seconds = 4;
  r.actors = {source};
  EXPECT_EQ(split_of_pipeline(r).actors, 0);
  EXPECT_EQ(split_of_data_parallel(r).actors, 0);
  EXPECT_NE(split_row("(b) ring", 18, split_of_data_parallel(r)).find("no figures"),
            std::string::npos);
}
