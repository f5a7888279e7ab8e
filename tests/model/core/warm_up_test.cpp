#include "model/core/warm_up.hpp"

#include <gtest/gtest.h>

using baton::model::warm_up_watch;

// The steady span starts where the warm-up's samples are trained and ends
// at the last step of that epoch: the evaluation after it is not training.
TEST(warm_up_watch, spans_the_steps_after_the_warm_up_to_the_end_of_its_epoch) {
  warm_up_watch watch{64};
  watch.trained(32);
  EXPECT_FALSE(watch.end().has_value());
  watch.trained(64); // the warm-up ends
  ASSERT_TRUE(watch.end().has_value());
  EXPECT_FALSE(watch.steady().has_value()); // no step after it yet
  watch.trained(96);
  watch.trained(128);
  watch.epoch_ended();
  watch.trained(160); // the next epoch, after an evaluation
  ASSERT_TRUE(watch.steady().has_value());
  EXPECT_EQ(watch.steady()->samples, 64);
  EXPECT_GE(watch.steady()->seconds, 0.0);
}

TEST(warm_up_watch, a_warm_up_ending_its_epoch_spans_the_next_epoch) {
  warm_up_watch watch{64};
  watch.trained(64);
  watch.epoch_ended(); // nothing after the warm-up in this epoch
  watch.trained(96);
  watch.trained(128);
  watch.epoch_ended();
  watch.trained(160);
  ASSERT_TRUE(watch.steady().has_value());
  EXPECT_EQ(watch.steady()->samples, 64);
  // Not asked (0 samples): never marked.
  warm_up_watch unasked;
  unasked.trained(1000);
  EXPECT_FALSE(unasked.end().has_value());
  EXPECT_FALSE(unasked.steady().has_value());
}
