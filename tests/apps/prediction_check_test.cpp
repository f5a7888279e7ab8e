// The cost model's check against a compare's runs (apps/report/analysis):
// the ranking is kept unless two runs that the prediction orders are
// measured the other way round; runs predicted within 1% of each other are
// a tie that the model does not order, and runs whose repeats' ranges
// overlap a tie that the runs do not order, each listed as such.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "apps/report/analysis.hpp"

using baton::apps::prediction_check;
using nlohmann::json;

namespace {

/// A run measured at `measured` samples/s (192 samples a step) and predicted at `predicted`.
json run(const std::string& label, double measured, double predicted) {
  return {{"label", label},
          {"strategy", "data-parallel:" + label},
          {"summary", {{"samples_per_second", measured}, {"step_seconds", 192 / measured}}},
          {"predicted",
           {{"samples_per_second", predicted},
            {"samples_per_step", 192},
            {"step_seconds", 192 / predicted},
            {"method", "simulation"}}}};
}

} // namespace

TEST(prediction_check, a_pair_predicted_alike_is_not_ordered) {
  // ring and ps predicted at the same rate (0.1% apart), measured ps slower.
  const auto check = prediction_check(json::array(
    {run("local", 900, 1000), run("ps", 690, 703.0), run("ring", 700, 703.7)}));
  EXPECT_TRUE(check["ranking_matches"].get<bool>()) << check.dump();
  ASSERT_EQ(check["predicted_ties"].size(), 1u) << check.dump();
  EXPECT_EQ(check["predicted_ties"][0], json::array({"ps", "ring"}));
  EXPECT_EQ(check["measured_ranking"], json::array({"local", "ring", "ps"}));
}

TEST(prediction_check, a_pair_ordered_by_the_prediction_and_measured_the_other_way_is_a_miss) {
  const auto check = prediction_check(json::array(
    {run("local", 900, 1000), run("ps", 690, 720), run("ring", 700, 700)}));
  EXPECT_FALSE(check["ranking_matches"].get<bool>()) << check.dump();
  EXPECT_TRUE(check["predicted_ties"].empty()) << check.dump();
  EXPECT_NEAR(check["mean_abs_error_percent"].get<double>(),
              (10 + 100 * (1 - 690.0 / 720) + 0) / 3, 1e-6); // step errors: m / p - 1
}

// Issue 34: two runs whose repeats' ranges overlap are not ordered by the
// runs (the recommendation's tie), so measured the other way round they
// break no ranking; once their ranges are apart they do.
TEST(prediction_check, a_pair_whose_repeats_overlap_is_not_ordered_by_the_runs) {
  // The repeats' steps, from their lowest and highest rates (192 samples a step).
  auto with_spread = [](json r, double low, double high) {
    r["spread"]["step_seconds"] = {
      {"min", 192 / high}, {"max", 192 / low}, {"median", r["summary"]["step_seconds"]}};
    return r;
  };
  // ps predicted 3% faster than the ring, measured 1.4% slower: 650-720 against 680-705.
  auto check = prediction_check(json::array({run("local", 900, 1000),
                                             with_spread(run("ps", 690, 720), 650, 720),
                                             with_spread(run("ring", 700, 700), 680, 705)}));
  EXPECT_TRUE(check["ranking_matches"].get<bool>()) << check.dump();
  EXPECT_EQ(check["measured_ties"], json::array({json::array({"ps", "ring"})})) << check.dump();
  EXPECT_TRUE(check["predicted_ties"].empty()) << check.dump();
  // The same medians with ranges apart (ps at most 695, the ring at least 696): a miss.
  check = prediction_check(json::array({run("local", 900, 1000),
                                        with_spread(run("ps", 690, 720), 650, 695),
                                        with_spread(run("ring", 700, 700), 696, 705)}));
  EXPECT_FALSE(check["ranking_matches"].get<bool>()) << check.dump();
  EXPECT_TRUE(check["measured_ties"].empty()) << check.dump();
}

// Issue 34: the ranking is of the steps the errors check: after the warm-up
// where a run measured one, against the predicted training step (without
// the evaluation's share), not the whole run's samples/s, which carries the
// warm-up and the evaluations the model does not order by.
TEST(prediction_check, the_ranking_is_of_the_steps_checked) {
  auto steady = [](json r, double step, double evaluation) {
    r["summary"]["steady_step_seconds"] = step;
    r["predicted"]["evaluation_seconds"] = evaluation;
    return r;
  };
  // 1f1b: whole run 962 samples/s, 56.1 ms a step after the warm-up,
  // predicted 57.3 (2 of them evaluation); gpipe: 984, 57.6, 59.1 (2).
  const auto check = prediction_check(json::array(
    {steady(run("1f1b", 962, 192 / 0.0573), 0.0561, 0.002),
     steady(run("gpipe", 984, 192 / 0.0591), 0.0576, 0.002)}));
  EXPECT_EQ(check["measured_ranking"], json::array({"1f1b", "gpipe"})) << check.dump();
  EXPECT_EQ(check["predicted_ranking"], json::array({"1f1b", "gpipe"})) << check.dump();
  EXPECT_TRUE(check["ranking_matches"].get<bool>()) << check.dump();
  EXPECT_NEAR(check["runs"][0]["predicted_step_seconds"].get<double>(), 0.0553, 1e-9);
}
