// input_order: a stage under static 1F1B takes the microbatches of several
// upstream replicas in the source's order, whatever the order of arrival.

#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "actors/modes/pipeline/input_order.hpp"

using baton::actors::pipeline::input_order;
using baton::actors::pipeline::microbatch_position;

namespace {

/// A microbatch's id and position.
struct arrival {
  int64_t id;
  microbatch_position position;
};

arrival training(int64_t id, int64_t step, int32_t index, int32_t size) {
  return {id, {step, index, size, false}};
}

arrival evaluation(int64_t id) {
  return {id, {0, 0, 1, true}};
}

/// The ids in the order a stage takes them, holding them as it does (by id,
/// the lowest may go when the order says so).
std::vector<int64_t> taken(input_order order, const std::vector<arrival>& arrivals) {
  std::map<int64_t, microbatch_position> held;
  std::vector<int64_t> out;
  for (const auto& a : arrivals) {
    held.emplace(a.id, a.position);
    while (!held.empty() && order.ready(held.begin()->second)) {
      order.take(held.begin()->second);
      out.push_back(held.begin()->first);
      held.erase(held.begin());
    }
  }
  return out;
}

} // namespace

// An unreplicated stage after 2 replicas: index i of a step comes from replica
// i % 2. Whichever replica runs ahead, the ids go in order, evaluation last.
TEST(input_order, two_senders_in_the_source_order) {
  const std::vector<int64_t> expected{0, 1, 2, 3, 4, 5};
  // Replica 0 sends steps 0 and 1 and the evaluation before replica 1 sends.
  EXPECT_EQ(taken(input_order{0, 1},
                  {training(0, 0, 0, 2), training(2, 1, 0, 2), evaluation(4), evaluation(5),
                   training(1, 0, 1, 2), training(3, 1, 1, 2)}),
            expected);
  // Replica 1 runs ahead.
  EXPECT_EQ(taken(input_order{0, 1},
                  {training(1, 0, 1, 2), training(3, 1, 1, 2), training(0, 0, 0, 2),
                   training(2, 1, 0, 2), evaluation(4), evaluation(5)}),
            expected);
}

// Replica 1 of 2 after 3 replicas gets indices 1 and 3 of each step of 4,
// from replicas 1 and 0: index 3 waits for index 1, the next step for both.
TEST(input_order, a_replica_takes_its_share_in_order) {
  EXPECT_EQ(taken(input_order{1, 2},
                  {training(3, 0, 3, 4), training(7, 1, 3, 4), training(1, 0, 1, 4),
                   training(5, 1, 1, 4)}),
            (std::vector<int64_t>{1, 3, 5, 7}));
}

// What may go: not a step's second microbatch before its first, not the
// next step's first before the share of this one, not an evaluation before
// the last step's share.
TEST(input_order, waits_for_what_comes_before) {
  input_order order{0, 1};
  EXPECT_FALSE(order.ready({0, 1, 2, false}));
  EXPECT_TRUE(order.ready({0, 0, 2, false}));
  order.take({0, 0, 2, false});
  EXPECT_FALSE(order.ready({1, 0, 2, false}));
  EXPECT_FALSE(order.ready({0, 0, 1, true}));
  EXPECT_TRUE(order.ready({0, 1, 2, false}));
  order.take({0, 1, 2, false});
  EXPECT_TRUE(order.ready({1, 0, 2, false}));
  EXPECT_TRUE(order.ready({0, 0, 1, true}));
}

// A step too short for this replica (the last of an epoch) gives it nothing;
// its share of the next step comes in order.
TEST(input_order, a_step_without_a_share) {
  input_order order{1, 2};
  EXPECT_EQ(order.share_of(1), 0);
  EXPECT_EQ(order.share_of(4), 2);
  EXPECT_EQ(taken(order, {training(1, 0, 1, 2), training(5, 2, 1, 2)}),
            (std::vector<int64_t>{1, 5}));
}
