// save: best and early_stopping as plain data (model/core/epoch_selection.hpp,
// best_weights.hpp): which epoch is the best by validation accuracy, when
// the patience is spent, and the weights a one-process reference keeps.

#include "model/core/epoch_selection.hpp"

#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/best_weights.hpp"

using namespace baton::model;

TEST(epoch_selection, the_best_is_the_first_of_the_highest) {
  epoch_selection s;
  EXPECT_EQ(s.best_epoch(), -1);
  EXPECT_TRUE(s.add(0, 0.50));
  EXPECT_TRUE(s.add(1, 0.60));
  EXPECT_FALSE(s.add(2, 0.60)); // equal is no improvement: the earlier stays
  EXPECT_FALSE(s.add(3, 0.55));
  EXPECT_EQ(s.best_epoch(), 1);
  EXPECT_DOUBLE_EQ(s.best_accuracy(), 0.60);
  EXPECT_EQ(s.epochs_since_best(), 2);
  EXPECT_FALSE(s.exhausted()); // no patience: never
  EXPECT_TRUE(s.add(4, 0.61));
  EXPECT_EQ(s.epochs_since_best(), 0);
}

TEST(epoch_selection, patience_is_spent_after_that_many_epochs_without_a_better_one) {
  epoch_selection s(2);
  s.add(0, 0.5);
  EXPECT_FALSE(s.exhausted());
  s.add(1, 0.4);
  EXPECT_FALSE(s.exhausted()); // one epoch without
  s.add(2, 0.7);               // a better one starts over
  EXPECT_FALSE(s.exhausted());
  s.add(3, 0.7);
  s.add(4, 0.6);
  EXPECT_TRUE(s.exhausted()); // two without: epochs 3 and 4
  EXPECT_EQ(s.best_epoch(), 2);
  epoch_selection one(1);
  one.add(0, 0.3);
  EXPECT_FALSE(one.exhausted());
  one.add(1, 0.3);
  EXPECT_TRUE(one.exhausted());
}

TEST(best_weights, keeps_a_copy_of_the_best_epoch_only_when_asked) {
  auto w = torch::zeros({3});
  best_weights keep({true, 1});
  EXPECT_TRUE(keep.epoch_end(0, 0.5, {w}));
  w.add_(1); // trained on in place: the copy is the epoch's
  EXPECT_FALSE(keep.epoch_end(1, 0.4, {w}));
  EXPECT_TRUE(keep.stop());
  EXPECT_EQ(keep.best_epoch(), 0);
  ASSERT_EQ(keep.weights().size(), 1u);
  EXPECT_TRUE(torch::equal(keep.weights()[0], torch::zeros({3})));
  // save: last judges epochs (the table names the best) and keeps nothing.
  best_weights last({false, 0});
  EXPECT_TRUE(last.epoch_end(0, 0.5, {w}));
  EXPECT_EQ(last.best_epoch(), 0);
  EXPECT_TRUE(last.weights().empty());
  EXPECT_FALSE(last.stop());
  // Without validation samples (accuracy -1) nothing is judged.
  best_weights none({true, 1});
  EXPECT_FALSE(none.epoch_end(0, -1, {w}));
  EXPECT_FALSE(none.epoch_end(1, -1, {w}));
  EXPECT_EQ(none.best_epoch(), -1);
  EXPECT_FALSE(none.stop());
}
