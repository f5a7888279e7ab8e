#include "apps/report/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>

namespace baton::apps {

namespace {

using nlohmann::json;

/// Time to target of a run that reached it; none otherwise.
std::optional<double> reached_seconds(const json& run) {
  const auto& s = summary_of(run);
  if (!s.value("reached", false))
    return std::nullopt;
  return number_at(s, "time_to_target_seconds");
}

/// The min-max range of a run's time to target: its spread's, else its one
/// time (a run made once).
std::pair<double, double> time_range(const json& run, double time) {
  auto spread = run.find("spread");
  if (spread != run.end() && spread->is_object() && spread->contains("time_to_target_seconds")) {
    const auto& t = (*spread)["time_to_target_seconds"];
    auto low = number_at(t, "min"), high = number_at(t, "max");
    if (low && high)
      return {*low, *high};
  }
  return {time, time};
}

/// "12.3 s" or, for a repeated run, "12.3 s (median of 3 runs, 11.9-13.0 s)"
/// (seconds_digits: "0.863 s" under a second).
std::string time_text(const json& run, double time) {
  auto [low, high] = time_range(run, time);
  auto runs = run.contains("spread") ? number_at(run["spread"], "runs") : std::nullopt;
  const int digits = seconds_digits(time);
  std::string text = fixed(time, digits) + " s";
  if (runs && *runs > 1)
    text += " (median of " + fixed(*runs, 0) + " runs, " + fixed(low, digits) + "-" +
            fixed(high, digits) + " s)";
  return text;
}

std::string label_of(const json& run) {
  return run.value("label", run.value("strategy", "run"));
}

/// A run as the check ranks it: its samples a step over the step checked
/// (after the warm-up where it measured one, as the errors), measured (the
/// median, and the range of its repeats) and predicted (simulated, and by
/// the formula: 0 without).
struct ranked_run {
  const json* run = nullptr;
  double measured = 0, low = 0, high = 0; ///< samples/s
  double predicted = 0, formula = 0;      ///< samples/s
};

/// Labels of `rows` sorted by `rate`, highest first.
template <class Rate>
json labels_by_rate(std::vector<ranked_run> rows, Rate rate) {
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const ranked_run& a, const ranked_run& b) { return rate(a) > rate(b); });
  json labels = json::array();
  for (const auto& r : rows)
    labels.push_back(r.run->value("label", ""));
  return labels;
}

/// Whether the measured rates keep the order of the predicted ones: no two
/// runs whose predicted rates differ by more than `predicted_tie` (relative)
/// are measured the other way round. The pairs predicted closer than that
/// are added to `ties` (labels): the model does not order them. The pairs
/// whose repeats' ranges overlap are added to `measured_ties`: the runs do
/// not order them either (the recommendation's tie), and they cannot break
/// the order.
template <class Predicted>
bool order_kept(const std::vector<ranked_run>& rows, Predicted predicted, json& ties,
                json& measured_ties) {
  constexpr double predicted_tie = 0.01;
  bool kept = true;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j) {
      const auto& a = rows[i];
      const auto& b = rows[j];
      const json pair = {a.run->value("label", ""), b.run->value("label", "")};
      const double pa = predicted(a);
      const double pb = predicted(b);
      if (std::fabs(pa - pb) <= predicted_tie * std::max(pa, pb)) {
        ties.push_back(pair);
        continue;
      }
      if (a.low <= b.high && b.low <= a.high) {
        measured_ties.push_back(pair);
        continue;
      }
      if ((pa > pb) != (a.low > b.high))
        kept = false;
    }
  return kept;
}

/// Samples a step of a run: its prediction's, else its measured rate times
/// its measured step.
std::optional<double> samples_per_step(const json& run) {
  if (auto samples = number_at(run.value("predicted", json::object()), "samples_per_step"))
    return samples;
  auto rate = number_at(summary_of(run), "samples_per_second");
  auto step = number_at(summary_of(run), "step_seconds");
  if (rate && step)
    return *rate * *step;
  return std::nullopt;
}

} // namespace

const json& summary_of(const json& run) {
  static const json none = json::object();
  auto it = run.find("summary");
  return it != run.end() && it->is_object() ? *it : none;
}

int seconds_digits(double seconds) {
  return seconds < 1 ? 3 : seconds < 10 ? 2 : 1;
}

std::string fixed(double x, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, x);
  return text;
}

std::optional<double> number_at(const json& j, const char* key) {
  if (!j.is_object())
    return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number())
    return std::nullopt;
  return it->get<double>();
}

std::optional<double> common_seconds(const json& runs) {
  std::optional<double> common;
  for (const auto& run : runs) {
    const auto& curve = summary_of(run).value("curve", json::array());
    if (!curve.is_array() || curve.empty())
      continue;
    auto end = number_at(curve.back(), "seconds");
    if (end && (!common || *end < *common))
      common = end;
  }
  return common;
}

double accuracy_within(const json& run, double seconds) {
  double best = 0;
  const auto& curve = summary_of(run).value("curve", json::array());
  if (curve.is_array())
    for (const auto& point : curve)
      if (number_at(point, "seconds").value_or(seconds + 1) <= seconds)
        best = std::max(best, number_at(point, "test_accuracy").value_or(0));
  return best;
}

std::vector<size_t> ranking(const json& runs) {
  std::vector<size_t> order(runs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto common = common_seconds(runs);
  auto accuracy = [&](const json& run) {
    return common ? accuracy_within(run, *common)
                  : number_at(summary_of(run), "best_accuracy").value_or(0);
  };
  auto before = [&](size_t a, size_t b) {
    auto ta = reached_seconds(runs[a]);
    auto tb = reached_seconds(runs[b]);
    if (ta && tb)
      return *ta < *tb;
    if (ta || tb)
      return ta.has_value();
    return accuracy(runs[a]) > accuracy(runs[b]);
  };
  std::stable_sort(order.begin(), order.end(), before);
  return order;
}

json recommendation(const json& runs, const json& target) {
  auto order = ranking(runs);
  std::string goal = target.is_number() ? "the target (" + fixed(100 * target.get<double>(), 1) +
                                            "% test accuracy)"
                                        : "the end of training (no target)";
  if (order.empty() || !reached_seconds(runs[order.front()])) {
    auto common = common_seconds(runs);
    std::string sentence = "None reached " + goal + ": no winner.";
    if (common) {
      sentence += " The rows are ranked by the best test accuracy reached within the shortest "
                  "common time, " + fixed(*common, seconds_digits(*common)) + " s:";
      for (size_t i = 0; i < order.size(); ++i) {
        const auto& run = runs[order[i]];
        if (!run.contains("summary"))
          continue;
        auto first = summary_of(run).value("curve", json::array());
        bool evaluated = first.is_array() && !first.empty() &&
                         number_at(first.front(), "seconds").value_or(*common + 1) <= *common;
        sentence += std::string{i ? "," : ""} + " " + label_of(run) + " " +
                    (evaluated ? fixed(100 * accuracy_within(run, *common), 1) + "%"
                               : std::string{"no epoch evaluated by then"});
      }
      sentence += ".";
    } else {
      sentence += " No run evaluated an epoch.";
    }
    return {{"kind", "none_reached"}, {"winners", json::array()}, {"sentence", sentence}};
  }
  const auto& fastest = runs[order.front()];
  auto best = *reached_seconds(fastest);
  auto [low, high] = time_range(fastest, best);
  json winners = json::array({label_of(fastest)});
  std::string tied = label_of(fastest) + " " + time_text(fastest, best);
  for (size_t i = 1; i < order.size(); ++i) {
    auto time = reached_seconds(runs[order[i]]);
    if (!time)
      break;
    auto [other_low, other_high] = time_range(runs[order[i]], *time);
    if (other_low > high || other_high < low)
      continue;
    winners.push_back(label_of(runs[order[i]]));
    tied += ", " + label_of(runs[order[i]]) + " " + time_text(runs[order[i]], *time);
  }
  if (winners.size() > 1)
    return {{"kind", "tie"},
            {"winners", winners},
            {"sentence", "A tie within the measured spread: " + tied + " to " + goal +
                           ": their min-max ranges overlap; more repeats (--repeat) may "
                           "separate them."}};
  return {{"kind", "fastest"},
          {"winners", winners},
          {"sentence", "Fastest to " + goal + ": " + tied + "."}};
}

std::optional<double> speedup_over_local(const json& runs, const json& run) {
  auto local = std::find_if(runs.begin(), runs.end(), [](const json& r) {
    return r.value("strategy", "") == "local";
  });
  if (local == runs.end())
    return std::nullopt;
  auto base = reached_seconds(*local);
  auto mine = reached_seconds(run);
  if (!base || !mine || *mine <= 0)
    return std::nullopt;
  return *base / *mine;
}

json with_predicted_steps(json runs, const json& predictions, const json& cluster) {
  if (!predictions.is_object() || !predictions.contains("measured"))
    return runs;
  auto hosts = number_at(cluster, "local_nodes");
  for (auto& run : runs) {
    if (run.contains("predicted"))
      continue;
    const json* match = nullptr;
    for (const auto& row : predictions["measured"]) {
      if (row.value("strategy", "") != run.value("strategy", ""))
        continue;
      if (!match || (hosts && number_at(row, "hosts") == hosts))
        match = &row;
    }
    if (match)
      run["predicted"] = *match;
  }
  return runs;
}

namespace {

/// The predicted step of a run: the prediction's ("predicted": a simulation
/// of the run's plan) or the formula's cross-check ("formula", inside it);
/// `training` leaves out its share of the evaluation, where it gives one.
std::optional<double> predicted_step_of(const json& run, const std::string& which, bool training) {
  if (!run.contains("predicted"))
    return std::nullopt;
  const json& p = which == "predicted" ? run["predicted"] : run["predicted"].value(which, json());
  auto step = number_at(p, "step_seconds");
  if (!step || !training)
    return step;
  return *step - number_at(p, "evaluation_seconds").value_or(0);
}

} // namespace

std::map<std::string, double> check_errors(const json& check) {
  std::map<std::string, double> out;
  if (!check.is_object() || !check.contains("runs"))
    return out;
  for (const auto& row : check["runs"]) {
    auto error = number_at(row, "error_percent");
    if (!error)
      continue;
    double& worst = out[row.value("strategy", "")];
    worst = std::max(worst, std::fabs(*error));
  }
  return out;
}

json prediction_check(const json& runs) {
  json rows = json::array();
  std::vector<ranked_run> ranked;
  double abs_error = 0;
  double formula_abs_error = 0;
  size_t formula_rows = 0;
  for (const auto& run : runs) {
    // The step after the warm-up where the run measured one: the model
    // predicts a steady step (the whole run's mean also carries the first
    // steps' page faults, a large share of a short run). The steady span
    // holds no evaluation, so it is checked against the predicted training
    // step, without the evaluation's share.
    auto steady = number_at(summary_of(run), "steady_step_seconds");
    const char* key = steady ? "steady_step_seconds" : "step_seconds";
    auto measured = number_at(summary_of(run), key);
    auto guess = predicted_step_of(run, "predicted", steady.has_value());
    auto samples = samples_per_step(run);
    if (!measured || !guess || !samples || *measured <= 0 || *guess <= 0)
      continue;
    double error = (*guess - *measured) / *measured * 100;
    abs_error += std::fabs(error);
    rows.push_back({{"label", run.value("label", "")},
                    {"strategy", run.value("strategy", "")},
                    {"measured_step_seconds", *measured},
                    {"measured_after_warm_up", steady.has_value()},
                    {"predicted_step_seconds", *guess},
                    {"error_percent", error}});
    rows.back()["method"] = run["predicted"].value("method", "formula");
    // Ranked by the steps checked: the repeats' slowest and fastest steps
    // are the range of the run's rate.
    const auto spread = run.value("spread", json::object()).value(key, json());
    const double slowest = std::max(*measured, number_at(spread, "max").value_or(*measured));
    const double fastest = std::min(*measured, number_at(spread, "min").value_or(*measured));
    ranked_run r{&run, *samples / *measured, *samples / slowest, *samples / fastest,
                 *samples / *guess};
    if (auto formula = predicted_step_of(run, "formula", steady.has_value());
        formula && *formula > 0) {
      double e = (*formula - *measured) / *measured * 100;
      rows.back()["formula_step_seconds"] = *formula;
      rows.back()["formula_error_percent"] = e;
      formula_abs_error += std::fabs(e);
      ++formula_rows;
      r.formula = *samples / *formula;
    }
    ranked.push_back(r);
  }
  if (rows.empty())
    return nullptr;
  auto measured_rate = [](const ranked_run& r) { return r.measured; };
  auto predicted_rate = [](const ranked_run& r) { return r.predicted; };
  json ties = json::array();
  json measured_ties = json::array();
  const bool kept = order_kept(ranked, predicted_rate, ties, measured_ties);
  json check = {{"runs", rows},
                {"measured_ranking", labels_by_rate(ranked, measured_rate)},
                {"predicted_ranking", labels_by_rate(ranked, predicted_rate)},
                {"ranking_matches", kept},
                {"predicted_ties", ties},
                {"measured_ties", measured_ties},
                {"mean_abs_error_percent", abs_error / static_cast<double>(rows.size())}};
  // What made the predictions checked: every run's simulated, or not.
  const bool all_simulated = std::all_of(rows.begin(), rows.end(), [](const json& row) {
    return row.value("method", "") == "simulation";
  });
  check["method"] = all_simulated ? "simulation" : "formula";
  if (formula_rows == rows.size()) {
    // Every run also has the formula's step: the cross-check's own ranking and error.
    auto formula_rate = [](const ranked_run& r) { return r.formula; };
    json formula_ties = json::array();
    json formula_measured_ties = json::array();
    check["formula_ranking"] = labels_by_rate(ranked, formula_rate);
    check["formula_ranking_matches"] =
      order_kept(ranked, formula_rate, formula_ties, formula_measured_ties);
    check["formula_mean_abs_error_percent"] =
      formula_abs_error / static_cast<double>(rows.size());
  }
  return check;
}

} // namespace baton::apps
