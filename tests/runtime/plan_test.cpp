// The plans of both modes, built from their configs and checked as data:
// which actors (role, node, threads, flags, result group) and which edges,
// in which order. No actor system starts.

#include "actors/modes/registry.hpp"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "actors/config/topology.hpp"
#include "actors/modes/job_schemas.hpp"
#include "messages/errc.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::actors;

namespace {

const std::string configs = std::string(BATON_SOURCE_DIR) + "/configs/";

job_plan plan_from(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return baton::testing::plan_or_fail(load_topology(configs + file, overrides));
}

std::vector<std::string> names(const job_plan& p) {
  std::vector<std::string> out;
  for (const auto& a : p.actors)
    out.push_back(a.role + ":" + a.name);
  return out;
}

std::vector<std::string> edges(const job_plan& p, planned_edge::kind_t kind) {
  std::vector<std::string> out;
  for (const auto& e : p.edges)
    if (e.kind == kind)
      out.push_back(e.from + ">" + e.to +
                    (kind == planned_edge::kind_t::peer ? "#" + std::to_string(e.index) : ""));
  return out;
}

} // namespace

// Transfer: source -> frozen stages -> every head; heads trainable, one
// result each; only the source starts.
TEST(plan, transfer_is_a_chain_that_fans_out_to_the_heads) {
  auto p = plan_from("transfer.yaml", {"runtime.compute_threads=1", "runtime.head_threads=2"});
  EXPECT_EQ(names(p), (std::vector<std::string>{"source:source", "stage:stage0", "stage:stage1",
                                                "stage:stage2", "head:all10", "head:footwear",
                                                "head:groups4"}));
  EXPECT_EQ(edges(p, planned_edge::kind_t::data),
            (std::vector<std::string>{"source>stage0", "stage0>stage1", "stage1>stage2",
                                      "stage2>all10", "stage2>footwear", "stage2>groups4"}));
  EXPECT_TRUE(edges(p, planned_edge::kind_t::peer).empty());
  EXPECT_EQ(p.trainable_names(), (std::vector<std::string>{"all10", "footwear", "groups4"}));
  for (const auto& a : p.actors) {
    EXPECT_EQ(a.starts, a.role == "source") << a.name;
    EXPECT_EQ(a.result, a.role == "head" ? a.name : "") << a.name;
    EXPECT_EQ(a.threads, a.role == "head" ? 2 : 1) << a.name;
    EXPECT_EQ(a.sends_weights, a.role == "head") << a.name << ": --save-model's weights";
    EXPECT_EQ(a.node, "") << a.name << ": embedded";
  }
}

// The source runs beside the stage it feeds, wherever that one is placed
// (its microbatches and their credits then cross no process), and takes no
// node of its own: with as many nodes as stages, each stage has one. A
// source placed by hand (data.node) stays where it is put.
TEST(plan, the_source_runs_beside_the_stage_it_feeds) {
  for (const auto* file : {"pipeline.yaml", "transfer.yaml"}) {
    auto t = load_topology(configs + file, {});
    ASSERT_TRUE(t) << baton::describe(t.error());
    auto p = baton::testing::plan_or_fail(t, 3);
    ASSERT_NE(p.find("stage2"), nullptr) << file;
    EXPECT_EQ(p.find("source")->node, "n1") << file;
    EXPECT_EQ(p.find("stage0")->node, "n1") << file;
    EXPECT_EQ(p.find("stage1")->node, "n2") << file;
    EXPECT_EQ(p.find("stage2")->node, "n3") << file;

    auto placed = with_local_nodes(*t, 3);
    placed.source_node = "n3";
    p = baton::testing::plan_or_fail(placed);
    EXPECT_EQ(p.find("source")->node, "n3") << file;
    EXPECT_EQ(p.find("stage0")->node, "n2") << file << ": the source's slot is its own";
  }
  // Replicas of the first stage: beside its first replica.
  auto p = plan_from("pipeline.yaml", {"data.microbatches=2", "pipeline.stages.0.replicas=2"});
  EXPECT_EQ(p.find("source")->with, "stage0.0");
}

// Pipeline "1-2-1": stage 1 replicated; consecutive stages all to all in
// replica order, replicas peers of each other, the last stage the result,
// replica 0 of each stage sends its weights.
TEST(plan, a_replicated_pipeline_connects_stages_all_to_all) {
  auto p = plan_from("pipeline.yaml", {"data.microbatches=2", "pipeline.stages.1.replicas=2"});
  EXPECT_EQ(names(p), (std::vector<std::string>{"source:source", "pipeline_stage:stage0",
                                                "pipeline_stage:stage1.0",
                                                "pipeline_stage:stage1.1",
                                                "pipeline_stage:stage2"}));
  EXPECT_EQ(edges(p, planned_edge::kind_t::data),
            (std::vector<std::string>{"source>stage0", "stage0>stage1.0", "stage0>stage1.1",
                                      "stage1.0>stage2", "stage1.1>stage2"}));
  EXPECT_EQ(edges(p, planned_edge::kind_t::peer),
            (std::vector<std::string>{"stage1.0>stage1.1#1", "stage1.1>stage1.0#0"}));
  EXPECT_EQ(p.trainable_names(),
            (std::vector<std::string>{"stage0", "stage1.0", "stage1.1", "stage2"}));
  EXPECT_EQ(p.group_size("stage2"), 1u);
  for (const auto& a : p.actors) {
    EXPECT_EQ(a.result, a.name == "stage2" ? "stage2" : "") << a.name;
    EXPECT_EQ(a.sends_weights, a.name == "stage0" || a.name == "stage1.0" || a.name == "stage2")
      << a.name;
  }
}

// The last stage replicated: its replicas report into one result.
TEST(plan, replicas_of_the_last_stage_share_one_result) {
  auto p = plan_from("pipeline.yaml", {"data.microbatches=2", "pipeline.stages.2.replicas=2"});
  EXPECT_EQ(p.group_size("stage2"), 2u);
  ASSERT_NE(p.find("stage2.1"), nullptr);
  EXPECT_EQ(p.find("stage2.0")->result, "stage2");
  EXPECT_EQ(p.find("stage2.1")->result, "stage2");
  EXPECT_EQ(p.find("stage1")->result, "");
}

// A replica that would get no microbatch is refused when the plan is made,
// naming the file.
TEST(plan, more_replicas_than_microbatches_is_refused) {
  auto t = load_topology(configs + "pipeline.yaml",
                         {"data.microbatches=2", "pipeline.stages.0.replicas=3"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto plan = plan_of(*t);
  ASSERT_FALSE(plan);
  auto text = baton::describe(plan.error());
  EXPECT_NE(text.find("pipeline.yaml: pipeline stage 0 has 3 replicas"), std::string::npos)
    << text;
}

// Every role a plan names is in the role table a node is handed.
TEST(plan, every_planned_role_is_in_the_role_table) {
  for (const auto* file : {"transfer.yaml", "pipeline.yaml"})
    for (const auto& a : plan_from(file).actors)
      EXPECT_NE(find_role(all_roles(), a.role), nullptr) << file << ": " << a.role;
}
