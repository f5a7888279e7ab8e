#include "actors/runtime/fault_injector.hpp"

#include <gtest/gtest.h>

#include "tests/support/moments.hpp"

using baton::actors::fault_injector;
using baton::actors::fault_spec;
using baton::testing::moment;
using namespace std::chrono_literals;

namespace {

fault_spec throw_at(std::string actor, int64_t step) {
  fault_spec f;
  f.kind = "throw";
  f.actor = std::move(actor);
  f.at_step = step;
  return f;
}

fault_spec node_fault(std::string kind, std::string node, int64_t step,
                      std::chrono::milliseconds after = -1ms) {
  fault_spec f;
  f.kind = std::move(kind);
  f.node = std::move(node);
  f.at_step = step;
  f.after = after;
  return f;
}

fault_spec edge_fault(std::string kind, std::string from, std::string to, int64_t step) {
  fault_spec f;
  f.kind = std::move(kind);
  f.from = std::move(from);
  f.to = std::move(to);
  f.at_step = step;
  f.delay = 5ms;
  return f;
}

fault_spec chaos(double rate, uint64_t seed) {
  fault_spec f;
  f.kind = "chaos";
  f.rate = rate;
  f.seed = seed;
  return f;
}

/// One line per fault chaos fired over `steps` steps: "step kind target".
std::vector<std::string> chaos_run(uint64_t seed, int64_t steps,
                                   const std::vector<std::string>& nodes) {
  fault_injector faults{{chaos(0.3, seed)}};
  std::vector<std::string> fired;
  for (int64_t step = 1; step <= steps; ++step)
    for (const auto& f : faults.on_step(step, moment(step), nodes, {"head0", "head1"}))
      fired.push_back(std::to_string(step) + " " + f.kind + " " + f.actor + f.node);
  return fired;
}

} // namespace

TEST(fault_injector, a_throw_is_armed_once_and_not_again_after_a_restart) {
  fault_injector faults{{throw_at("head1", 7)}};
  EXPECT_EQ(faults.throw_step_for("head0"), -1);
  EXPECT_EQ(faults.throw_step_for("head1"), 7);
  EXPECT_EQ(faults.throw_step_for("head1"), -1) << "the restarted actor must not throw again";
}

TEST(fault_injector, node_faults_fire_at_their_step_once) {
  fault_injector faults{{node_fault("kill_node", "n2", 5), node_fault("stop_node", "n1", 8)}};
  EXPECT_TRUE(faults.on_step(4, moment(4), {"n1", "n2"}, {}).empty());
  auto fired = faults.on_step(6, moment(6), {"n1", "n2"}, {}); // a step may be skipped
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].kind, "kill_node");
  EXPECT_EQ(fired[0].node, "n2");
  EXPECT_EQ(faults.last_step(), 6);
  EXPECT_TRUE(faults.on_step(5, moment(7), {"n1"}, {}).empty()) << "a replayed step";
  EXPECT_TRUE(faults.on_step(7, moment(7), {"n1"}, {}).empty());
  ASSERT_EQ(faults.on_step(8, moment(8), {"n1"}, {}).size(), 1u);
  EXPECT_TRUE(faults.on_step(9, moment(9), {"n1"}, {}).empty());
}

TEST(fault_injector, node_faults_fire_after_their_time_once) {
  fault_injector faults{{node_fault("stop_node", "n1", -1, 2000ms)}};
  EXPECT_TRUE(faults.due(1999ms, moment(1999)).empty());
  auto fired = faults.due(2000ms, moment(2000));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].node, "n1");
  EXPECT_TRUE(faults.due(5000ms, moment(5000)).empty());
  // A step-only fault is not due by time.
  fault_injector by_step{{node_fault("kill_node", "n1", 3)}};
  EXPECT_TRUE(by_step.due(1h, moment(0)).empty());
}

TEST(fault_injector, notify_from_step_is_the_first_step_a_node_fault_waits_for) {
  EXPECT_EQ(fault_injector{}.notify_from_step(), -1);
  EXPECT_EQ(fault_injector{{throw_at("head0", 3)}}.notify_from_step(), -1);
  EXPECT_EQ(fault_injector{{node_fault("kill_node", "n1", -1, 100ms)}}.notify_from_step(), -1);
  fault_injector faults{{node_fault("kill_node", "n1", 9), node_fault("stop_node", "n2", 4)}};
  EXPECT_EQ(faults.notify_from_step(), 4);
  faults.on_step(4, moment(4), {"n1", "n2"}, {});
  EXPECT_EQ(faults.notify_from_step(), 9) << "a fault that fired waits no more";
  EXPECT_EQ(fault_injector{{chaos(0.1, 1)}}.notify_from_step(), 1);
}

TEST(fault_injector, chaos_with_a_seed_gives_the_same_faults_twice) {
  auto first = chaos_run(7, 60, {"n1", "n2", "n3"});
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, chaos_run(7, 60, {"n1", "n2", "n3"}));
  EXPECT_NE(first, chaos_run(8, 60, {"n1", "n2", "n3"})) << "the seed chooses";
}

TEST(fault_injector, chaos_never_kills_the_last_live_node) {
  size_t faults = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed)
    for (const auto& line : chaos_run(seed, 50, {"", "n1"})) { // "" is the embedded process
      EXPECT_NE(line.find(" throw head"), std::string::npos) << "seed " << seed << ": " << line;
      ++faults;
    }
  EXPECT_GT(faults, 0u);
  // With two nodes it does kill or stop one.
  bool node_faults = false;
  for (const auto& line : chaos_run(7, 60, {"n1", "n2"}))
    node_faults |= line.find("_node n") != std::string::npos;
  EXPECT_TRUE(node_faults);
}

TEST(fault_injector, edge_faults_are_set_until_a_drop_happens_and_a_drop_counts_once) {
  fault_injector faults{{edge_fault("delay", "stage1", "head0", -1),
                         edge_fault("drop", "stage1", "head1", 12)}};
  ASSERT_EQ(faults.edge_faults().size(), 2u);
  EXPECT_TRUE(faults.dropped("stage2", moment(0)).empty());
  auto fired = faults.dropped("stage1", moment(100));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].to, "head1");
  EXPECT_TRUE(faults.dropped("stage1", moment(200)).empty()) << "a drop counts once";
  auto edges = faults.edge_faults();
  ASSERT_EQ(edges.size(), 1u) << "a drop that happened is not set again";
  EXPECT_EQ(edges[0].kind, "delay");

  auto e = faults.explain("head1", moment(350));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, "drop");
  EXPECT_EQ(e->target, "stage1->head1");
  EXPECT_EQ(e->at_step, 12);
  EXPECT_EQ(e->detected_after_ms, 250) << "from the first report";
  EXPECT_FALSE(faults.explain("head1", moment(400)).has_value()) << "it explains one failure";
}

TEST(fault_injector, a_fault_explains_a_failure_once) {
  fault_injector faults{{throw_at("head0", 3), node_fault("kill_node", "n2", 5)}};
  EXPECT_FALSE(faults.explain("head0", moment(0)).has_value()) << "nothing was injected yet";
  faults.throw_step_for("head0");
  faults.on_step(5, moment(1000), {"n1", "n2"}, {});
  // A node fault that fired explains a failure first, whatever failed.
  auto node = faults.explain("head0", moment(1400));
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->kind, "kill_node");
  EXPECT_EQ(node->target, "n2");
  EXPECT_EQ(node->at_step, 5);
  EXPECT_EQ(node->detected_after_ms, 400);
  // A throw explains only its own actor's failure, found by the actor itself.
  EXPECT_FALSE(faults.explain("head1", moment(2000)).has_value());
  auto thrown = faults.explain("head0", moment(2000));
  ASSERT_TRUE(thrown.has_value());
  EXPECT_EQ(thrown->kind, "throw");
  EXPECT_EQ(thrown->target, "head0");
  EXPECT_EQ(thrown->at_step, 3);
  EXPECT_EQ(thrown->detected_after_ms, 0);
  EXPECT_FALSE(faults.explain("head0", moment(3000)).has_value());
}

TEST(fault_injector, a_chaos_throw_explains_its_actors_failure) {
  fault_injector faults{{chaos(1.0, 3)}};
  auto fired = faults.on_step(1, moment(10), {"n1"}, {"head0"}); // one node: throws only
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].kind, "throw");
  EXPECT_EQ(fired[0].actor, "head0");
  EXPECT_EQ(fired[0].where, "chaos");
  auto e = faults.explain("head0", moment(60));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->detected_after_ms, 50);
  EXPECT_EQ(e->at_step, 1);
}

TEST(fault_injector, a_node_fault_must_name_a_node_of_the_job) {
  using baton::actors::unknown_fault_node;
  auto kill = node_fault("kill_node", "n3", 5);
  kill.where = "t.yaml:9";
  std::vector<fault_spec> faults{throw_at("head0", 3), kill};
  EXPECT_FALSE(unknown_fault_node(faults, {"n1", "n3"}, false).has_value());
  EXPECT_FALSE(unknown_fault_node({throw_at("n9", 3)}, {"n1"}, false).has_value())
    << "only node faults name nodes";
  auto listed = unknown_fault_node(faults, {"n1", "n2"}, false);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(*listed, "t.yaml:9: fault 'kill_node' names node 'n3', which is not one of the "
                     "topology's nodes");
  auto embedded = unknown_fault_node(faults, {""}, true);
  ASSERT_TRUE(embedded.has_value());
  EXPECT_EQ(*embedded, "t.yaml:9: fault 'kill_node' names node 'n3', but the job runs embedded "
                       "in one process (use --local-nodes N or nodes:)");
}

TEST(fault_injector, a_fault_past_the_jobs_last_step_is_warned_about) {
  using baton::actors::unreachable_fault_warnings;
  auto late = throw_at("head0", 8);
  late.where = "--fault 1";
  auto last = node_fault("kill_node", "n1", 7);
  // 2 epochs of 50 samples in minibatches of 16: 4 steps each (the last
  // minibatch is short), steps 0..7.
  std::vector<fault_spec> faults{last, late, node_fault("stop_node", "n1", -1, 100ms)};
  auto warnings = unreachable_fault_warnings(faults, 100, 2, 16);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "--fault 1: fault 'throw' at step 8 will never fire: the job has 8 "
                         "steps (50 training samples per epoch in minibatches of 16)");
  // 65 samples per epoch are 5 minibatches: steps 0..9, all can fire (a
  // fault set by time has no step).
  EXPECT_TRUE(unreachable_fault_warnings(faults, 130, 2, 16).empty());
}

TEST(fault_injector, a_failure_record_is_in_the_words_of_the_fault_that_explains_it) {
  fault_injector faults{{node_fault("kill_node", "n2", 5)}};
  faults.on_step(3, moment(500), {"n1", "n2"}, {});
  // Nothing injected explains it: what the coordinator saw, at the job's step.
  auto seen = faults.record_failure("actor_down", "head0", 0, moment(600));
  EXPECT_EQ(seen.kind, "actor_down");
  EXPECT_EQ(seen.target, "head0");
  EXPECT_EQ(seen.at_step, 3);
  EXPECT_EQ(seen.detected_after_ms, -1);
  EXPECT_EQ(seen.recovered_after_ms, -1);
  EXPECT_EQ(seen.restored_step, 0);

  faults.on_step(6, moment(1000), {"n1", "n2"}, {});
  auto injected = faults.record_failure("node_lost", "n2", 4, moment(1300));
  EXPECT_EQ(injected.kind, "kill_node");
  EXPECT_EQ(injected.target, "n2");
  EXPECT_EQ(injected.at_step, 5) << "the step it was set for, not the step it was seen at";
  EXPECT_EQ(injected.detected_after_ms, 300);
  EXPECT_EQ(injected.recovered_after_ms, -1);
  EXPECT_EQ(injected.restored_step, 4);
}
