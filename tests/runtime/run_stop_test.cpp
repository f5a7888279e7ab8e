#include "actors/runtime/run_stop.hpp"

#include <gtest/gtest.h>

#include "tests/support/moments.hpp"

using baton::actors::run_stop;
using baton::testing::moment;
using namespace std::chrono_literals;

TEST(run_stop, stops_once_every_head_reached_the_target) {
  run_stop stop{0.85, 0, 2};
  EXPECT_FALSE(stop.epoch("a", 0, 0.90, 10));
  EXPECT_FALSE(stop.epoch("b", 0, 0.80, 11));
  auto at = stop.epoch("b", 1, 0.86, 20); // a reached it in an earlier epoch
  ASSERT_TRUE(at);
  EXPECT_EQ(at->actor, "b");
  EXPECT_EQ(at->epoch, 1);
  EXPECT_EQ(at->reason, "stop_at_accuracy");
  EXPECT_FALSE(stop.stopping());
  stop.begin(*at, moment(0));
  EXPECT_TRUE(stop.stopping());
  EXPECT_FALSE(stop.epoch("a", 2, 0.95, 30)); // once stopping, no second stop
}

TEST(run_stop, no_target_and_no_budget_never_stop) {
  run_stop stop{0, 0, 1};
  EXPECT_FALSE(stop.epoch("a", 0, 1.0, 1));
  EXPECT_FALSE(stop.time(1e9));
}

TEST(run_stop, the_budget_keeps_the_last_epoch_reported) {
  run_stop stop{0.99, 5, 1};
  auto none_yet = stop.time(6);
  ASSERT_TRUE(none_yet);
  EXPECT_EQ(none_yet->epoch, -1); // no epoch was reported
  EXPECT_EQ(none_yet->reason, "stop_after_seconds");
  EXPECT_FALSE(stop.epoch("a", 0, 0.7, 3));
  EXPECT_FALSE(stop.time(4.9));
  auto at = stop.time(5.5);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->actor, "a");
  EXPECT_EQ(at->epoch, 0);
  EXPECT_DOUBLE_EQ(at->test_accuracy, 0.7);
  EXPECT_DOUBLE_EQ(at->seconds, 5.5);
}

TEST(run_stop, unreported_actors_are_given_up_after_the_limit) {
  run_stop stop{0, 10, 1};
  EXPECT_FALSE(stop.past(0ms, moment(0))); // not stopping
  stop.begin(*stop.time(10), moment(1000));
  EXPECT_FALSE(stop.past(500ms, moment(1400)));
  EXPECT_TRUE(stop.past(500ms, moment(1500)));
}

TEST(run_stop, a_salvage_stops_without_a_stop_record) {
  run_stop stop{0.5, 10, 1};
  stop.salvage(moment(0));
  EXPECT_TRUE(stop.stopping());
  EXPECT_TRUE(stop.salvaging());
  EXPECT_FALSE(stop.stopped());
  EXPECT_FALSE(stop.epoch("a", 0, 0.9, 1)); // the run fails: no stop at the target
  EXPECT_FALSE(stop.time(20));
}

TEST(run_stop, the_reason_reads_as_the_log_says) {
  EXPECT_EQ(baton::actors::stop_reason({"all10", 2, 0.851, 30}, 0.85),
            "epoch 3 of all10 reached 85.10% (target_accuracy 85.00%)");
  EXPECT_EQ(baton::actors::stop_reason({"all10", 0, 0.7, 12, "stop_after_seconds"}, 0),
            "trained 12.0 s (runtime.stop_after_seconds)");
}

// early_stopping: once every head went `patience` epochs without a higher
// validation accuracy (model::epoch_selection), with the best epoch named.
TEST(run_stop, early_stopping_once_every_head_spent_its_patience) {
  run_stop stop{0, 0, 2, 2};
  EXPECT_FALSE(stop.epoch("a", 0, 0.5, 1, 0.60));
  EXPECT_FALSE(stop.epoch("b", 0, 0.5, 1, 0.50));
  EXPECT_FALSE(stop.epoch("a", 1, 0.5, 2, 0.60)); // equal: no improvement
  EXPECT_FALSE(stop.epoch("b", 1, 0.5, 2, 0.55));
  EXPECT_FALSE(stop.epoch("a", 2, 0.5, 3, 0.59)); // a: spent; b improved at 1
  EXPECT_FALSE(stop.epoch("b", 2, 0.5, 3, 0.54));
  auto at = stop.epoch("b", 3, 0.52, 4, 0.55);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->reason, "early_stopping");
  EXPECT_EQ(at->actor, "b");
  EXPECT_EQ(at->epoch, 3);
  EXPECT_EQ(at->best_epoch, 1);
  EXPECT_DOUBLE_EQ(at->best_validation_accuracy, 0.55);
  EXPECT_EQ(baton::actors::stop_reason(*at, 0),
            "epoch 4 of b: 2 epochs without a higher validation accuracy than epoch 2's 55.00% "
            "(early_stopping.patience 2)");
  // Without validation accuracies (-1) or without patience, nothing stops.
  run_stop unvalidated{0, 0, 1, 1};
  EXPECT_FALSE(unvalidated.epoch("a", 0, 0.5, 1, -1));
  EXPECT_FALSE(unvalidated.epoch("a", 1, 0.5, 2, -1));
  run_stop no_patience{0, 0, 1};
  EXPECT_FALSE(no_patience.epoch("a", 0, 0.5, 1, 0.5));
  EXPECT_FALSE(no_patience.epoch("a", 1, 0.5, 2, 0.4));
  // The target still stops a run that early stopping watches.
  run_stop both{0.8, 0, 1, 3};
  auto target = both.epoch("a", 0, 0.9, 1, 0.5);
  ASSERT_TRUE(target);
  EXPECT_EQ(target->reason, "stop_at_accuracy");
}

// A restart from a checkpoint before an epoch's end replays that end, and its
// report comes again: judged once. It was added twice, as an epoch without a
// higher accuracy, and a pipeline restarted after its first epoch stopped
// there ("0 epochs without a higher validation accuracy").
TEST(run_stop, an_epoch_reported_again_after_a_restart_is_judged_once) {
  run_stop stop{0, 0, 1, 1};
  EXPECT_FALSE(stop.epoch("a", 0, 0.5, 1, 0.60));
  EXPECT_FALSE(stop.epoch("a", 0, 0.5, 2, 0.60)); // the replay
  EXPECT_FALSE(stop.epoch("a", 1, 0.6, 3, 0.70));
  EXPECT_FALSE(stop.epoch("a", 0, 0.5, 4, 0.60)); // a later restart's replays
  EXPECT_FALSE(stop.epoch("a", 1, 0.6, 5, 0.70));
  auto at = stop.epoch("a", 2, 0.6, 6, 0.65);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->epoch, 2);
  EXPECT_EQ(at->best_epoch, 1);
}
