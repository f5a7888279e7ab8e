// A bench side's ratios round by round (apps/bench/rounds): each round's
// ratio takes the reference (the one-thread side, a peer) of the same round,
// rounds one side missed are left out, and the text gives the rounds in
// order with their median.

#include <gtest/gtest.h>

#include "apps/bench/rounds.hpp"

using namespace baton::apps;

TEST(rounds, each_round_s_ratio_takes_the_reference_of_that_round) {
  // The host slowed down in round 2: both sides by a third. The medians
  // (900 and 400) would give 1.125; every round says 1.0.
  const std::vector<round_rate> one{{1, 600}, {2, 400}, {3, 450}};
  const std::vector<round_rate> side{{3, 900}, {1, 1200}, {2, 800}}; // in any order
  const auto ratios = ratios_by_round(side, one, 2);
  ASSERT_EQ(ratios.size(), 3u);
  for (double r : ratios)
    EXPECT_DOUBLE_EQ(r, 1.0);
}

TEST(rounds, a_round_either_side_missed_is_left_out) {
  const std::vector<round_rate> one{{1, 500}, {3, 500}};  // round 2's failed
  const std::vector<round_rate> side{{1, 800}, {2, 900}, {3, 850}, {4, 700}};
  EXPECT_EQ(ratios_by_round(side, one, 2), (std::vector<double>{0.8, 0.85}));
  EXPECT_TRUE(ratios_by_round(side, {}, 2).empty());
  EXPECT_EQ(ratios_by_round({{1, 800}}, {{1, 0}}, 2), (std::vector<double>{0})); // unknown
}

TEST(rounds, the_text_gives_the_rounds_in_order_and_their_median) {
  EXPECT_EQ(rounds_text({0.86, 0.83, 0.841}), "0.86 0.83 0.84 (median 0.84)");
  EXPECT_EQ(rounds_text({0.9, 0.8}), "0.90 0.80 (median 0.90)");
  EXPECT_EQ(rounds_text({0.91}), "0.91 (median 0.91)");
}

TEST(rounds, a_side_s_text_leaves_out_a_ratio_without_rounds) {
  EXPECT_EQ((side_rounds{{0.84, 0.86}, {0.93, 0.95}}.text()),
            "of limit 0.84 0.86 (median 0.86), vs PT 2t 0.93 0.95 (median 0.95)");
  EXPECT_EQ((side_rounds{{0.84}, {}}.text()), "of limit 0.84 (median 0.84)"); // no python3-torch
  EXPECT_EQ((side_rounds{{}, {0.95}}.text()), "vs PT 2t 0.95 (median 0.95)");
  EXPECT_EQ(side_rounds{}.text(), "");
  EXPECT_EQ((side_rounds{{}, {1.02}}.text("PT 4t")), "vs PT 4t 1.02 (median 1.02)"); // W = 4
}
