#include "actors/flow/progress_pace.hpp"

#include <vector>

#include <gtest/gtest.h>

using baton::actors::progress_pace;

// Every `every` steps, and after the first step of each epoch but the first:
// the steady span (progress_line) then starts each epoch right after its
// evaluation, however short the epoch.
TEST(progress_pace, reports_every_n_steps_and_after_each_later_epoch_s_first_step) {
  progress_pace pace;
  std::vector<int> due_at;
  int step = 0;
  for (int32_t epoch = 0; epoch < 3; ++epoch)
    for (int k = 0; k < 7; ++k, ++step)
      if (pace.due(epoch, 1, 5))
        due_at.push_back(step);
  // Epoch 0: step 4 (the fifth); epoch 1 at step 7 (its first), then five
  // steps on: 12; epoch 2 at 14 (its first), then 19.
  EXPECT_EQ(due_at, (std::vector<int>{4, 7, 12, 14, 19}));
}

TEST(progress_pace, counts_rounds_of_several_steps) {
  progress_pace pace;
  EXPECT_FALSE(pace.due(0, 3, 5));
  EXPECT_TRUE(pace.due(0, 3, 5)); // 6 steps
  EXPECT_FALSE(pace.due(0, 3, 5));
  EXPECT_TRUE(pace.due(1, 3, 5)); // an epoch's first round
  EXPECT_FALSE(pace.due(1, 3, 5));
}

// The end of an epoch's training (its first evaluation microbatch) is
// reported once per epoch, whatever the steps' pace.
TEST(progress_pace, an_epoch_s_end_is_due_once) {
  progress_pace pace;
  EXPECT_TRUE(pace.ended(0));
  EXPECT_FALSE(pace.ended(0)); // the epoch's next evaluation microbatch
  EXPECT_TRUE(pace.ended(1));
  EXPECT_FALSE(pace.ended(0));
}
