#pragma once

// What the report concludes from its runs: their ranking by time to target,
// the speedup over the `local` row, and how the cost model's predictions
// compare with the measurements. Pure functions of the report's JSON.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace baton::apps {

/// The order of `runs` (run records) in the table: those that reached the
/// target by time to target (the median of a repeated run's), then the
/// others by their best accuracy within the shortest common time
/// (common_seconds), highest first; ties keep the given order. Indices into
/// `runs`.
std::vector<size_t> ranking(const nlohmann::json& runs);

/// The shortest common time of `runs`: the least of their training times as
/// their curves end (the seconds of each run's last evaluated epoch); none
/// when no run has an evaluated epoch. Runs that did not reach the target
/// compare fairly within it: the fastest run may have trained more epochs.
std::optional<double> common_seconds(const nlohmann::json& runs);

/// A run's best test accuracy among its epochs evaluated by `seconds` into
/// training (0 when none was).
double accuracy_within(const nlohmann::json& run, double seconds);

/// The decision the report states first: {"kind": "fastest", "tie" or
/// "none_reached", "winners": [labels] (the fastest, the tied; none when
/// no run reached the target), "sentence"}. The fastest is the run of the
/// least time to target; runs whose min-max range of time to target
/// (their "spread", a single value for a run made once) overlaps the
/// fastest's tie with it. `target`: the target accuracy (null: none).
nlohmann::json recommendation(const nlohmann::json& runs, const nlohmann::json& target);

/// A run's speedup over the run whose strategy is "local": the local run's
/// time to target over this one's; none when there is no local run or
/// either did not reach the target.
std::optional<double> speedup_over_local(const nlohmann::json& runs, const nlohmann::json& run);

/// The check of the cost model against the runs that have a "predicted"
/// step: {"runs": [{label, strategy, measured_step_seconds,
/// predicted_step_seconds, error_percent ((predicted - measured) /
/// measured x 100)}], "measured_ranking" and "predicted_ranking" (labels,
/// fastest first: by samples/s, each run's samples per step over the step
/// checked: after the warm-up where the run measured one, the predicted
/// training step beside it, as the errors), "ranking_matches" (no two runs
/// whose predicted rates differ by more than 1% measured the other way
/// round, a run's measured rate the range of its repeats' steps: "spread"),
/// "predicted_ties" (the pairs of labels predicted within 1% of each other:
/// not ordered by the model), "measured_ties" (the pairs whose ranges
/// overlap: not ordered by the runs, as the recommendation's tie),
/// "mean_abs_error_percent"}; null when no run has a prediction.
nlohmann::json prediction_check(const nlohmann::json& runs);

/// A check error beyond which a strategy's projection and crossovers are
/// not drawn (percent of the measured step).
constexpr double drawn_error_limit = 25;

/// Each strategy's largest step-time error in `check` (prediction_check's
/// object or null), absolute, in percent, by strategy name.
std::map<std::string, double> check_errors(const nlohmann::json& check);

/// `runs` with a "predicted" step for each run that has none, from the
/// row of `predictions`' "measured" of the same strategy (of the same
/// hosts as `cluster`'s local_nodes when the strategy has several rows).
nlohmann::json with_predicted_steps(nlohmann::json runs, const nlohmann::json& predictions,
                                    const nlohmann::json& cluster);

/// A number of `j` at `key`, none when it is missing or not a number.
std::optional<double> number_at(const nlohmann::json& j, const char* key);

/// A run's "summary" object, an empty one when it has none.
const nlohmann::json& summary_of(const nlohmann::json& run);

/// `x` with `digits` digits after the point ("%.*f").
std::string fixed(double x, int digits);

/// The digits after the point that show a time of `seconds` to three
/// significant digits up to 10 s ("0.863 s", "4.36 s") and to a tenth
/// above ("12.3 s"): short runs that differ by a few percent do not all
/// read "0.9 s" beside a winner.
int seconds_digits(double seconds);

} // namespace baton::apps
