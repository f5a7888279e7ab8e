#include "model/core/warm_up.hpp"

#include <gtest/gtest.h>

using baton::model::warm_up_watch;

// The steady span starts where the warm-up's samples are trained and sums
// every epoch's steps after it: the evaluations between epochs are not
// training.
TEST(warm_up_watch, sums_every_epoch_s_steps_after_the_warm_up) {
  warm_up_watch watch{64};
  watch.epoch_started();
  watch.trained(32);
  EXPECT_FALSE(watch.end().has_value());
  watch.trained(64); // the warm-up ends
  ASSERT_TRUE(watch.end().has_value());
  EXPECT_FALSE(watch.steady().has_value()); // no step after it yet
  watch.trained(96);
  watch.trained(128);
  watch.epoch_ended();
  ASSERT_TRUE(watch.steady().has_value());
  EXPECT_EQ(watch.steady()->samples, 64);
  watch.epoch_started(); // after an evaluation
  watch.trained(160);
  watch.trained(192);
  EXPECT_EQ(watch.steady()->samples, 128); // the open epoch counts
  watch.epoch_ended();
  EXPECT_EQ(watch.steady()->samples, 128);
  EXPECT_GE(watch.steady()->seconds, 0.0);
}

TEST(warm_up_watch, an_epoch_nobody_started_spans_from_its_first_step) {
  warm_up_watch watch{64};
  watch.trained(64);
  watch.epoch_ended(); // nothing after the warm-up in this epoch
  EXPECT_FALSE(watch.steady().has_value());
  watch.trained(96); // the span starts here: the step's start is unknown
  watch.trained(128);
  watch.epoch_ended();
  ASSERT_TRUE(watch.steady().has_value());
  EXPECT_EQ(watch.steady()->samples, 32);
  // Not asked (0 samples): never marked.
  warm_up_watch unasked;
  unasked.epoch_started();
  unasked.trained(1000);
  EXPECT_FALSE(unasked.end().has_value());
  EXPECT_FALSE(unasked.steady().has_value());
}
