// The live progress line as plain data: it counts the job's samples (a
// result group's members add up; a strategy whose worker 0 reports one of W
// equal shares is scaled to all of them) and numbers epochs from 1.

#include "actors/runtime/progress_line.hpp"

#include <gtest/gtest.h>

using baton::actors::job_plan;
using baton::actors::planned_actor;
using baton::actors::progress_line;

namespace {

planned_actor member(std::string name, std::string result) {
  planned_actor a;
  a.role = "worker";
  a.name = std::move(name);
  a.result = std::move(result);
  return a;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

// Data-parallel and IST: worker 0 reports its share of 2; the line counts
// both workers' samples, so that an epoch counts the epoch's samples.
TEST(progress_line, a_share_of_the_samples_is_scaled_to_the_whole_job) {
  job_plan plan;
  plan.actors = {member("worker.0", "workers"), member("worker.1", "workers")};
  plan.progress_shares = 2;
  progress_line line{false, plan};
  line.set_total(2 * 1024); // worker 0's share of 2 epochs of 2048 samples
  line.update("worker.0", 1, 1024 + 256, 0.5);
  const auto text = line.render();
  EXPECT_TRUE(starts_with(text, "epoch 2  2560/4096 samples  ")) << text;
  EXPECT_NE(text.find("loss workers=0.500"), std::string::npos) << text;
}

// A pipeline stage's replicas each report their own samples: they add up.
TEST(progress_line, the_members_of_a_group_add_up) {
  job_plan plan;
  plan.actors = {member("stage2.0", "stage2"), member("stage2.1", "stage2")};
  progress_line line{false, plan};
  line.set_total(1000);
  line.update("stage2.0", 0, 300, 1.0);
  line.update("stage2.1", 0, 200, 1.0);
  EXPECT_TRUE(starts_with(line.render(), "epoch 1  500/1000 samples  ")) << line.render();
}

// The first report marks where the run's warm-up ended (job_result::steady);
// its actor's reports then sum every epoch's span, from the epoch's first
// report to its last, so that no evaluation between epochs is inside.
TEST(progress_line, sums_the_first_reporter_s_epochs_after_its_first_report) {
  job_plan plan;
  plan.actors = {member("stage1", "stage1"), member("stage0", "stage0")};
  progress_line line{false, plan};
  EXPECT_FALSE(line.steady().has_value());
  line.update("stage1", 0, 640, 1.0); // the warm-up ends
  EXPECT_FALSE(line.steady().has_value());
  line.update("stage1", 0, 1280, 0.9);
  line.update("stage0", 0, 1920, 0.9); // another actor: not its measure
  line.update("stage1", 0, 1920, 0.8);
  ASSERT_TRUE(line.steady().has_value());
  EXPECT_EQ(line.steady()->actor, "stage1");
  EXPECT_EQ(line.steady()->samples, 1280);
  line.update("stage1", 1, 2560, 0.7); // the next epoch: after an evaluation
  EXPECT_EQ(line.steady()->samples, 1280);
  line.update("stage1", 1, 3840, 0.6);
  EXPECT_EQ(line.steady()->samples, 1280 + 1280);
  EXPECT_GE(line.steady()->seconds, 0.0);
  // An epoch with one report adds nothing: its span would hold an evaluation.
  progress_line short_epochs{false, plan};
  short_epochs.update("stage1", 0, 640, 1.0);
  short_epochs.update("stage1", 1, 1280, 0.9);
  EXPECT_FALSE(short_epochs.steady().has_value());
  short_epochs.update("stage1", 1, 1920, 0.8);
  ASSERT_TRUE(short_epochs.steady().has_value());
  EXPECT_EQ(short_epochs.steady()->samples, 640);
}
