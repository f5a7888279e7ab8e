// The result collector as plain data: reports in, one result per result
// group out, in plan order.

#include "actors/runtime/result_collector.hpp"

#include <gtest/gtest.h>

using baton::actors::job_plan;
using baton::actors::job_result;
using baton::actors::planned_actor;
using baton::actors::result_collector;
using baton::messages::actor_report;
using baton::messages::epoch_result;
using baton::messages::tensor_set;

namespace {

planned_actor collected_member(std::string name, std::string result, bool sends_weights = false) {
  planned_actor a;
  a.role = "stage";
  a.name = std::move(name);
  a.result = std::move(result);
  a.sends_weights = sends_weights;
  return a;
}

/// A report of `actor` with one epoch `epoch`: `samples` samples at `loss`,
/// `accuracy` on the test split.
actor_report report(std::string actor, int32_t epoch, int64_t samples, double loss,
                    double accuracy) {
  actor_report r;
  r.actor = std::move(actor);
  r.samples = samples;
  r.train_loss = loss;
  r.test_accuracy = accuracy;
  r.epochs.push_back(epoch_result{epoch, loss, accuracy, samples});
  return r;
}

tensor_set weights_of(std::string actor) {
  tensor_set w;
  w.kind = "weights";
  w.from = std::move(actor);
  return w;
}

/// A source in no group, a head of its own, and a stage of two replicas
/// (replica 1 listed first, as a plan may).
job_plan plan_with_replicas() {
  job_plan plan;
  plan.actors = {collected_member("source", ""), collected_member("head", "head"),
                 collected_member("stage.1", "stage"), collected_member("stage.0", "stage", true)};
  return plan;
}

} // namespace

TEST(result_collector, a_group_of_one_is_its_members_report) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  auto epoch = collected.epoch_report(report("head", 0, 64, 0.5, 0.75));
  ASSERT_TRUE(epoch.has_value());
  EXPECT_EQ(epoch->actor, "head");
  EXPECT_DOUBLE_EQ(epoch->epochs.front().train_loss, 0.5);
  // An actor in no group is shown as it is, too.
  ASSERT_TRUE(collected.epoch_report(report("source", 0, 64, 0, 0)).has_value());

  collected.final_report(report("head", 0, 64, 0.5, 0.75));
  job_result result;
  collected.finish(result);
  ASSERT_EQ(result.heads.size(), 1u); // the stage group is incomplete: left out
  EXPECT_EQ(result.heads[0].actor, "head");
  EXPECT_EQ(result.heads[0].samples, 64);
  EXPECT_DOUBLE_EQ(result.heads[0].test_accuracy, 0.75);
}

TEST(result_collector, replicas_merge_samples_and_weighted_loss_with_replica_0s_accuracy) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  collected.final_report(report("stage.1", 0, 30, 2.0, 0.1));
  collected.final_report(report("stage.0", 0, 10, 1.0, 0.9));
  job_result result;
  collected.finish(result);
  ASSERT_EQ(result.heads.size(), 1u);
  const auto& merged = result.heads[0];
  EXPECT_EQ(merged.actor, "stage");
  EXPECT_EQ(merged.samples, 40);
  EXPECT_DOUBLE_EQ(merged.epochs[0].train_loss, (1.0 * 10 + 2.0 * 30) / 40);
  EXPECT_DOUBLE_EQ(merged.train_loss, merged.epochs[0].train_loss);
  EXPECT_EQ(merged.epochs[0].samples, 40);
  EXPECT_DOUBLE_EQ(merged.test_accuracy, 0.9);           // replica 0 evaluates
  EXPECT_DOUBLE_EQ(merged.epochs[0].test_accuracy, 0.9);
  // Each replica's own report stays in the actors list, as it came.
  ASSERT_EQ(result.actors.size(), 2u);
  EXPECT_EQ(result.actors[0].actor, "stage.1");
  EXPECT_EQ(result.actors[1].actor, "stage.0");
}

TEST(result_collector, members_that_split_the_evaluation_pool_their_counts) {
  // Data-parallel workers: 1000 test samples in 4 batches, worker 0 took 2 (500
  // samples, 401 right), worker 1 the others (500, 410); 100 validation
  // samples, 60 and 40 of them (45 and 30 right).
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  auto a = report("stage.0", 0, 64, 1.0, 401.0 / 500);
  a.epochs[0].evaluated = 500;
  a.epochs[0].validation_accuracy = 45.0 / 60;
  a.epochs[0].validated = 60;
  auto b = report("stage.1", 0, 64, 1.0, 410.0 / 500);
  b.epochs[0].evaluated = 500;
  b.epochs[0].validation_accuracy = 30.0 / 40;
  b.epochs[0].validated = 40;
  ASSERT_FALSE(collected.epoch_report(b).has_value());
  auto epoch = collected.epoch_report(a);
  ASSERT_TRUE(epoch.has_value());
  // The same double as one worker that counted 811 of 1000 and 75 of 100.
  EXPECT_EQ(epoch->epochs[0].test_accuracy, 811.0 / 1000);
  EXPECT_EQ(epoch->epochs[0].evaluated, 1000);
  EXPECT_EQ(epoch->epochs[0].validation_accuracy, 75.0 / 100);
  EXPECT_EQ(epoch->epochs[0].validated, 100);
  EXPECT_EQ(epoch->test_accuracy, 811.0 / 1000);
  // A member that evaluated nothing is left out; counts that make no sense too.
  auto c = report("stage.0", 0, 64, 1.0, 0.0);
  auto d = report("stage.1", 0, 64, 1.0, 7.0 / 9);
  d.epochs[0].evaluated = 9;
  auto pooled = baton::actors::merge_replica_reports({c, d});
  EXPECT_EQ(pooled.epochs[0].test_accuracy, 7.0 / 9);
  d.epochs[0].evaluated = -9;
  EXPECT_EQ(baton::actors::merge_replica_reports({c, d}).epochs[0].test_accuracy, 0.0);
}

TEST(result_collector, an_epoch_report_waits_for_every_member_of_its_group) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  EXPECT_FALSE(collected.epoch_report(report("stage.0", 0, 10, 1.0, 0.9)).has_value());
  // Another epoch of the other replica does not complete epoch 0.
  EXPECT_FALSE(collected.epoch_report(report("stage.1", 1, 30, 2.0, 0.1)).has_value());
  auto epoch0 = collected.epoch_report(report("stage.1", 0, 30, 2.0, 0.1));
  ASSERT_TRUE(epoch0.has_value());
  EXPECT_EQ(epoch0->actor, "stage");
  EXPECT_EQ(epoch0->epochs.front().epoch, 0);
  EXPECT_EQ(epoch0->epochs.front().samples, 40);
  EXPECT_DOUBLE_EQ(epoch0->epochs.front().test_accuracy, 0.9);
  // Epoch 0 is forgotten once shown: a late copy waits again.
  EXPECT_FALSE(collected.epoch_report(report("stage.0", 0, 10, 1.0, 0.9)).has_value());
  auto epoch1 = collected.epoch_report(report("stage.0", 1, 10, 1.0, 0.9));
  ASSERT_TRUE(epoch1.has_value());
  EXPECT_EQ(epoch1->epochs.front().epoch, 1);
}

// A group's epoch is stamped when its last member reports it; a restart
// keeps the stamps, and an epoch trained again is stamped anew.
TEST(result_collector, stamps_each_group_epoch_with_its_time) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  EXPECT_FALSE(collected.epoch_report(report("stage.0", 0, 10, 1.0, 0.9), 1.5).has_value());
  EXPECT_TRUE(collected.epoch_report(report("stage.1", 0, 30, 2.0, 0.1), 2.5).has_value());
  EXPECT_FALSE(collected.epoch_report(report("stage.0", 1, 10, 1.0, 0.9), 3.0).has_value());
  collected.clear(); // a restart before epoch 1 completed
  EXPECT_FALSE(collected.epoch_report(report("stage.1", 1, 10, 1.0, 0.9), 5.0).has_value());
  EXPECT_TRUE(collected.epoch_report(report("stage.0", 1, 30, 2.0, 0.1), 6.0).has_value());
  job_result result;
  collected.finish(result);
  ASSERT_EQ(result.epoch_seconds.count("stage"), 1u);
  EXPECT_EQ(result.epoch_seconds.at("stage"), (std::map<int32_t, double>{{0, 2.5}, {1, 6.0}}));
}

TEST(result_collector, finish_orders_results_and_weights_by_the_plan) {
  job_plan plan;
  plan.actors = {collected_member("b", "b", true), collected_member("a.0", "a", true),
                 collected_member("a.1", "a"), collected_member("c", "c", true)};
  result_collector collected{plan};
  // They arrive in another order than the plan's.
  collected.weights(weights_of("c"));
  collected.final_report(report("c", 0, 1, 0, 0));
  collected.weights(weights_of("a.0"));
  collected.final_report(report("a.1", 0, 1, 0, 0));
  collected.final_report(report("a.0", 0, 1, 0, 0));
  collected.weights(weights_of("b"));
  collected.final_report(report("b", 0, 1, 0, 0));
  collected.weights(weights_of("a.1")); // a.1 does not send weights in the plan
  collected.trained("b", 7, 1);
  job_result result;
  collected.finish(result);
  std::vector<std::string> heads, weights;
  for (const auto& h : result.heads)
    heads.push_back(h.actor);
  for (const auto& w : result.stage_weights)
    weights.push_back(w.from);
  EXPECT_EQ(heads, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(weights, (std::vector<std::string>{"b", "a.0", "c"}));
  EXPECT_EQ(result.actors.size(), 4u);
  ASSERT_EQ(result.trained.count("b"), 1u);
  EXPECT_EQ(result.trained.at("b").trained, 7);
  EXPECT_EQ(result.trained.at("b").duplicates, 1);
}

TEST(result_collector, clear_forgets_a_pass) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  collected.final_report(report("head", 0, 64, 0.5, 0.75));
  collected.final_report(report("stage.0", 0, 10, 1.0, 0.9));
  EXPECT_FALSE(collected.epoch_report(report("stage.0", 0, 10, 1.0, 0.9)).has_value());
  collected.weights(weights_of("stage.0"));
  collected.trained("stage.0", 10, 0);
  collected.clear();

  // The next pass starts from nothing: replica 0's earlier reports do not
  // complete the group with replica 1's.
  EXPECT_FALSE(collected.epoch_report(report("stage.1", 0, 30, 2.0, 0.1)).has_value());
  collected.final_report(report("stage.1", 0, 30, 2.0, 0.1));
  job_result result;
  collected.finish(result);
  EXPECT_TRUE(result.heads.empty());
  EXPECT_TRUE(result.stage_weights.empty());
  EXPECT_TRUE(result.trained.empty());
  ASSERT_EQ(result.actors.size(), 1u);
  EXPECT_EQ(result.actors[0].actor, "stage.1");
}

// A group whose final reports never all come (its node was lost, a stop gave
// up on it) is the epochs it completed, not left out: the curves and the
// metrics of a failed run keep them.
TEST(result_collector, a_group_without_its_final_reports_is_its_completed_epochs) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  collected.epoch_report(report("stage.0", 0, 10, 1.0, 0.5));
  collected.epoch_report(report("stage.1", 0, 30, 2.0, 0.1));
  collected.epoch_report(report("stage.0", 1, 10, 0.5, 0.8));
  collected.epoch_report(report("stage.1", 1, 30, 1.0, 0.1));
  collected.epoch_report(report("stage.0", 2, 10, 0.2, 0.9)); // epoch 2 never completes
  collected.final_report(report("stage.0", 2, 10, 0.2, 0.9)); // nor does the final result
  job_result result;
  collected.finish(result);
  ASSERT_EQ(result.heads.size(), 1u);
  const auto& stage = result.heads[0];
  EXPECT_EQ(stage.actor, "stage");
  ASSERT_EQ(stage.epochs.size(), 2u);
  EXPECT_EQ(stage.epochs[1].epoch, 1);
  EXPECT_EQ(stage.samples, 80);
  EXPECT_DOUBLE_EQ(stage.train_loss, (0.5 * 10 + 1.0 * 30) / 40);
  EXPECT_DOUBLE_EQ(stage.test_accuracy, 0.8);
}

// The bytes a group sent in each epoch: its members' edges count bytes over
// their life, so an epoch's are the difference from the member's previous
// epoch report; restarted actors count from 0, and an epoch trained again
// replaces its bytes.
TEST(result_collector, counts_the_bytes_each_group_sent_in_each_epoch) {
  auto plan = plan_with_replicas();
  result_collector collected{plan};
  auto sent = [](actor_report r, int64_t bytes) {
    r.edges.push_back({r.actor, "next", 1, bytes});
    return r;
  };
  collected.epoch_report(sent(report("stage.0", 0, 10, 1.0, 0.5), 100));
  collected.epoch_report(sent(report("stage.1", 0, 30, 2.0, 0.1), 40));
  collected.epoch_report(sent(report("stage.0", 1, 10, 1.0, 0.5), 250));
  collected.clear(); // a restart before stage.1 finished epoch 1
  collected.epoch_report(sent(report("stage.0", 1, 10, 1.0, 0.5), 70));
  collected.epoch_report(sent(report("stage.1", 1, 30, 2.0, 0.1), 60));
  collected.epoch_report(sent(report("head", 0, 64, 0.5, 0.75), 0));
  job_result result;
  collected.finish(result);
  EXPECT_EQ(result.epoch_bytes.at("stage"), (std::map<int32_t, int64_t>{{0, 140}, {1, 130}}));
  EXPECT_EQ(result.epoch_bytes.at("head"), (std::map<int32_t, int64_t>{{0, 0}}));
}
