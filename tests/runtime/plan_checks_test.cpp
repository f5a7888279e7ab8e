#include "actors/runtime/plan_checks.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "messages/errc.hpp"

using baton::actors::cores;
using baton::actors::job_plan;
using baton::actors::make_planned_actor;
using baton::actors::settle_plan;
using baton::actors::topology;

namespace {

/// A source and two trainable stages with their own torch threads, and a
/// shard placed beside the second stage; no node given to any.
job_plan unplaced_plan() {
  job_plan plan;
  auto source = make_planned_actor("source", "source", "", "{}");
  source.threads = 0; // no torch threads of its own
  plan.actors.push_back(source);
  for (const char* name : {"stage0", "stage1"}) {
    auto stage = make_planned_actor("pipeline_stage", name, "", "{threads: 1}");
    stage.trainable = true;
    plan.actors.push_back(stage);
  }
  auto shard = make_planned_actor("ist_shard", "shard1", "", "{threads: 1}");
  shard.with = "stage1";
  plan.actors.push_back(shard);
  plan.edges.push_back({baton::actors::planned_edge::kind_t::data, "stage0", "stage1", 0});
  return plan;
}

topology on_nodes(std::initializer_list<const char*> names) {
  topology t;
  for (const char* name : names)
    t.nodes.push_back({name});
  return t;
}

} // namespace

TEST(plan_checks, settling_places_the_actors_round_robin_and_beside_the_one_they_go_with) {
  auto plan = unplaced_plan();
  ASSERT_FALSE(settle_plan(plan, on_nodes({"n1", "n2"})));
  EXPECT_EQ(plan.find("source")->node, "n1");
  EXPECT_EQ(plan.find("stage0")->node, "n2");
  EXPECT_EQ(plan.find("stage1")->node, "n1");
  EXPECT_EQ(plan.find("shard1")->node, "n1"); // with stage1, no slot of its own
  // Embedded: every actor in this process.
  auto embedded = unplaced_plan();
  ASSERT_FALSE(settle_plan(embedded, topology{}));
  for (const auto& a : embedded.actors)
    EXPECT_EQ(a.node, "") << a.name;
}

TEST(plan_checks, settling_shares_the_cores_among_the_computing_actors_unless_asked) {
  auto plan = unplaced_plan();
  ASSERT_FALSE(settle_plan(plan, topology{}));
  const int32_t share = std::max(1, cores() / 3); // three actors compute
  for (const char* name : {"stage0", "stage1", "shard1"}) {
    EXPECT_EQ(plan.find(name)->threads, share) << name;
    EXPECT_NE(plan.find(name)->settings.find("threads: " + std::to_string(share)),
              std::string::npos)
      << plan.find(name)->settings;
  }
  EXPECT_EQ(plan.find("source")->threads, 0);
  EXPECT_EQ(plan.threads_asked_by, "");
  // runtime.compute_threads asked: every budget stays as the plan has it,
  // and the coordinator's warning names the key.
  auto asked = unplaced_plan();
  asked.actors[1].threads = 5;
  topology t;
  t.runtime.compute_threads_asked = true;
  ASSERT_FALSE(settle_plan(asked, t));
  EXPECT_EQ(asked.find("stage0")->threads, 5);
  EXPECT_EQ(asked.find("stage0")->settings, "{threads: 1}");
  EXPECT_TRUE(asked.find("stage1")->threads_asked);
  EXPECT_EQ(asked.threads_asked_by, "runtime.compute_threads");
}

TEST(plan_checks, settling_refuses_a_fault_that_names_what_the_plan_does_not_have) {
  auto plan = unplaced_plan();
  auto t = on_nodes({"n1"});
  baton::actors::fault_spec f;
  f.kind = "throw";
  f.actor = "source";
  f.where = "job.yaml:12";
  t.faults.push_back(f);
  auto err = settle_plan(plan, t);
  ASSERT_TRUE(err);
  const std::string what = baton::describe(err);
  EXPECT_NE(what.find("job.yaml:12: fault 'throw' names actor 'source'"), std::string::npos)
    << what;
  EXPECT_NE(what.find("stage0, stage1"), std::string::npos) << what;
  // The steps before the check are done: the plan is placed.
  EXPECT_EQ(plan.find("stage0")->node, "n1");
  t.faults.front().actor = "stage1";
  EXPECT_FALSE(settle_plan(plan, t));
}
