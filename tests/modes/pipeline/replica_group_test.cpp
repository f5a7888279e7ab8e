// replica_group: a replicated stage's sums of its share of each step, its
// peers' sums, and the group's steps in step order, without a run.

#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "actors/modes/pipeline/replica_group.hpp"

using baton::actors::pipeline::replica_group;
using baton::actors::pipeline::share_of;

namespace {

std::vector<at::Tensor> gradients(float value) {
  return {at::full({2}, value), at::full({3}, value * 10)};
}

std::vector<at::Tensor> no_zeros() {
  ADD_FAILURE() << "a replica with a share contributed zeros";
  return {};
}

} // namespace

TEST(replica_group, shares_of_a_step_deal_microbatch_i_to_replica_i_mod_n) {
  EXPECT_EQ(share_of(4, 0, 2), 2);
  EXPECT_EQ(share_of(4, 1, 2), 2);
  EXPECT_EQ(share_of(3, 1, 2), 1);
  EXPECT_EQ(share_of(1, 1, 2), 0); // an epoch's short last step
  EXPECT_EQ(share_of(5, 2, 3), 1);
}

// Replica 1 of 2 sums its two backwards of a step, contributes once both are
// done, and steps once its peer's sum is in: the sum in replica order,
// divided by the step's microbatches for 1f1b.
TEST(replica_group, contributes_its_share_and_steps_with_the_sum_in_replica_order) {
  replica_group g{1, 2, 0};
  EXPECT_TRUE(g.settled());
  g.add_backward(0, 4, gradients(1));
  EXPECT_FALSE(g.next_contribution(no_zeros)); // one of its two backwards
  g.add_backward(0, 4, gradients(2));
  auto c = g.next_contribution(no_zeros);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 0);
  EXPECT_EQ(c->step_size, 4);
  EXPECT_TRUE(at::equal(c->sum[0], at::full({2}, 3.0f)));
  EXPECT_FALSE(g.next_contribution(no_zeros));
  EXPECT_EQ(g.contributed(), 1);
  EXPECT_FALSE(g.settled()); // no forward until the group step
  EXPECT_FALSE(g.next_step(true));
  g.add_peer(0, 0, 4, gradients(5));
  auto sum = g.next_step(true);
  ASSERT_TRUE(sum);
  EXPECT_TRUE(at::equal((*sum)[0], at::full({2}, 2.0f)));  // (5 + 3) / 4
  EXPECT_TRUE(at::equal((*sum)[1], at::full({3}, 20.0f))); // (50 + 30) / 4
  EXPECT_EQ(g.applied(), 1);
  EXPECT_TRUE(g.settled());
  EXPECT_FALSE(g.next_step(true));
}

// Replica 0's sum comes first whichever arrived first: the same bits on
// every replica; gpipe's sum (not the mean) as it is.
TEST(replica_group, every_replica_sums_in_the_same_order) {
  const std::vector<float> values{0.1f, 0.2f, 0.3f};
  std::vector<at::Tensor> sums;
  for (int32_t self = 0; self < 3; ++self) {
    replica_group g{self, 3, 0};
    for (int32_t r = 2; r >= 0; --r) // peers in reverse order of replica
      if (r != self)
        g.add_peer(r, 0, 3, gradients(values[r]));
    g.add_backward(0, 3, gradients(values[self]));
    ASSERT_TRUE(g.next_contribution(no_zeros));
    auto sum = g.next_step(false);
    ASSERT_TRUE(sum);
    sums.push_back((*sum)[0]);
  }
  EXPECT_TRUE(at::equal(sums[0], sums[1]));
  EXPECT_TRUE(at::equal(sums[0], sums[2]));
  EXPECT_TRUE(at::equal(sums[0], (at::full({2}, 0.1f) + 0.2f) + 0.3f));
}

// A step this replica has no share of (an epoch's last, short one)
// contributes zeros, in step order after the steps before it; steps are
// made in step order even when a later one's contributions come first.
TEST(replica_group, a_step_without_a_share_contributes_zeros_in_step_order) {
  replica_group g{1, 2, 0};
  g.add_peer(0, 1, 1, gradients(7)); // step 1 has 1 microbatch: replica 0's
  int zeros_asked = 0;
  auto zeros = [&] {
    zeros_asked += 1;
    return gradients(0);
  };
  EXPECT_FALSE(g.next_contribution(zeros)); // step 0 first: its share not done
  EXPECT_EQ(zeros_asked, 0);
  g.add_backward(0, 2, gradients(1));
  ASSERT_TRUE(g.next_contribution(zeros));
  auto c = g.next_contribution(zeros);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 1);
  EXPECT_EQ(zeros_asked, 1);
  EXPECT_FALSE(g.next_step(true)); // step 0 lacks replica 0's sum
  g.add_peer(0, 0, 2, gradients(3));
  ASSERT_TRUE(g.next_step(true));
  auto second = g.next_step(true);
  ASSERT_TRUE(second);
  EXPECT_TRUE(at::equal((*second)[0], at::full({2}, 7.0f)));
  EXPECT_EQ(g.applied(), 2);
}

// A restored stage continues after its checkpoint's step; a peer's step
// sent twice, or one already made, is refused.
TEST(replica_group, refuses_a_step_sent_twice_or_made_already) {
  replica_group g{0, 2, 8};
  EXPECT_EQ(g.applied(), 8);
  EXPECT_TRUE(g.settled());
  EXPECT_THROW(g.add_peer(1, 7, 2, gradients(1)), std::runtime_error);
  g.add_peer(1, 8, 2, gradients(1));
  EXPECT_THROW(g.add_peer(1, 8, 2, gradients(1)), std::runtime_error);
}
