// save: best in an actors' run (actors/runtime/best_epochs.hpp): the
// weights the senders send after every epoch, kept until their result's
// epoch report judges the epoch, in whatever order the two arrive, and the
// best epoch's put in place of the final weights.

#include "actors/runtime/best_epochs.hpp"

#include <gtest/gtest.h>
#include <ATen/ATen.h>

using namespace baton::actors;
using baton::messages::tensor_set;

namespace {

planned_actor sender(std::string name, std::string result) {
  planned_actor a;
  a.name = std::move(name);
  a.result = std::move(result);
  a.sends_weights = true;
  return a;
}

/// A pipeline's plan: two stages send weights, the last reports "stage1".
job_plan pipeline_plan() {
  job_plan plan;
  plan.actors = {sender("stage0", ""), sender("stage1", "stage1")};
  return plan;
}

tensor_set epoch_weights(const std::string& from, int64_t epoch, float value) {
  return {"epoch_weights", from, 0, epoch, 0, {at::full({2}, value)}, {}};
}

job_result final_weights() {
  job_result r;
  for (const char* stage : {"stage0", "stage1"})
    r.stage_weights.push_back({"weights", stage, 0, 9, 0, {at::full({2}, 99.0f)}, {}});
  return r;
}

float first(const job_result& r, size_t i) { return r.stage_weights[i].tensors[0][0].item<float>(); }

} // namespace

TEST(best_epochs, keeps_each_senders_weights_of_its_groups_best_epoch) {
  best_epochs best(pipeline_plan());
  best.weights(epoch_weights("stage0", 0, 0));
  best.weights(epoch_weights("stage1", 0, 0));
  best.epoch("stage1", 0, 0.5); // best so far: kept
  best.epoch("stage1", 1, 0.7); // judged before its weights came
  best.weights(epoch_weights("stage1", 1, 1));
  best.weights(epoch_weights("stage0", 1, 1));
  best.weights(epoch_weights("stage0", 2, 2)); // waits for its judgement
  best.weights(epoch_weights("stage1", 2, 2));
  best.epoch("stage1", 2, 0.6); // not better: dropped
  best.epoch("stage1", 1, 0.9); // a replay after a restart changes nothing
  auto r = final_weights();
  EXPECT_EQ(best.finish(r), "");
  EXPECT_TRUE(r.saved_best);
  EXPECT_EQ(r.best_epochs.at("stage1"), 1);
  EXPECT_EQ(first(r, 0), 1.0f);
  EXPECT_EQ(first(r, 1), 1.0f);
}

TEST(best_epochs, keeps_the_final_weights_when_a_best_epoch_never_came) {
  best_epochs best(pipeline_plan());
  best.weights(epoch_weights("stage1", 0, 0));
  best.epoch("stage1", 0, 0.5);
  auto r = final_weights();
  EXPECT_NE(best.finish(r).find("'stage0' sent no weights of its best epoch"), std::string::npos);
  EXPECT_FALSE(r.saved_best);
  EXPECT_EQ(r.best_epochs.at("stage1"), 0); // still named in the table
  EXPECT_EQ(first(r, 0), 99.0f);
  // Without validation accuracies nothing is judged or kept.
  best_epochs unvalidated(pipeline_plan());
  unvalidated.weights(epoch_weights("stage0", 0, 0));
  unvalidated.epoch("stage1", 0, -1);
  auto u = final_weights();
  unvalidated.finish(u);
  EXPECT_TRUE(u.best_epochs.empty());
  EXPECT_EQ(first(u, 1), 99.0f);
}

// Transfer's heads are their own results: each keeps its own best epoch.
TEST(best_epochs, each_head_has_its_own_best_epoch) {
  job_plan plan;
  plan.actors = {sender("a", "a"), sender("b", "b")};
  best_epochs best(plan);
  for (int e = 0; e < 2; ++e) {
    best.weights(epoch_weights("a", e, static_cast<float>(e)));
    best.weights(epoch_weights("b", e, static_cast<float>(e)));
  }
  best.epoch("a", 0, 0.9);
  best.epoch("b", 0, 0.5);
  best.epoch("a", 1, 0.8);
  best.epoch("b", 1, 0.6);
  job_result r;
  for (const char* head : {"a", "b"})
    r.stage_weights.push_back({"weights", head, 0, 9, 0, {at::full({2}, 99.0f)}, {}});
  EXPECT_EQ(best.finish(r), "");
  EXPECT_EQ(r.best_epochs.at("a"), 0);
  EXPECT_EQ(r.best_epochs.at("b"), 1);
  EXPECT_EQ(first(r, 0), 0.0f);
  EXPECT_EQ(first(r, 1), 1.0f);
}
