#include "actors/flow/credit_window.hpp"

#include <deque>
#include <random>

#include <gtest/gtest.h>

using baton::actors::credit_window;

TEST(credit_window, admits_exactly_its_size) {
  credit_window w{3};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(w.can_send());
    w.on_send();
  }
  EXPECT_FALSE(w.can_send());
  EXPECT_EQ(w.in_flight(), 3);
  ASSERT_TRUE(w.on_credit());
  EXPECT_TRUE(w.can_send());
  EXPECT_EQ(w.in_flight(), 2);
}

TEST(credit_window, refuses_credits_for_messages_never_sent) {
  credit_window w{2};
  EXPECT_FALSE(w.on_credit());
  w.on_send();
  EXPECT_FALSE(w.on_credit(2));
  EXPECT_FALSE(w.on_credit(0));
  EXPECT_EQ(w.in_flight(), 1);
  EXPECT_TRUE(w.on_credit(1));
  EXPECT_EQ(w.in_flight(), 0);
}

// A sender that always sends when it may, against a receiver that frees slots
// at random times: the number in flight never exceeds the window.
TEST(credit_window, never_exceeds_its_size_under_random_interleaving) {
  for (int size : {1, 2, 4, 8}) {
    credit_window w{size};
    std::deque<int> receiver_queue;
    std::mt19937 rng{static_cast<unsigned>(size)};
    int sent = 0;
    while (sent < 1000 || !receiver_queue.empty()) {
      if (sent < 1000 && w.can_send() && rng() % 2 == 0) {
        w.on_send();
        receiver_queue.push_back(sent++);
      } else if (!receiver_queue.empty() && rng() % 3 == 0) {
        receiver_queue.pop_front();
        ASSERT_TRUE(w.on_credit());
      }
      ASSERT_LE(w.in_flight(), size);
      ASSERT_EQ(static_cast<int>(receiver_queue.size()), w.in_flight());
    }
    EXPECT_EQ(w.peak_in_flight(), size);
    EXPECT_EQ(w.sent(), 1000);
  }
}
