#include "apps/report/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace baton::apps {

namespace {

using nlohmann::json;

const json& summary_of(const json& run) {
  static const json none = json::object();
  auto it = run.find("summary");
  return it != run.end() && it->is_object() ? *it : none;
}

/// Time to target of a run that reached it; none otherwise.
std::optional<double> reached_seconds(const json& run) {
  const auto& s = summary_of(run);
  if (!s.value("reached", false))
    return std::nullopt;
  return number_at(s, "time_to_target_seconds");
}

/// Samples per second the cost model predicts for `run` (see prediction_check).
std::optional<double> predicted_rate(const json& run) {
  const auto& p = run.at("predicted");
  if (auto rate = number_at(p, "samples_per_second"))
    return rate;
  auto step = number_at(p, "step_seconds");
  auto samples = number_at(p, "samples_per_step");
  if (step && samples && *step > 0)
    return *samples / *step;
  return std::nullopt;
}

/// Labels of `rows` sorted by `rate`, highest first.
template <class Rate>
json labels_by_rate(std::vector<const json*> rows, Rate rate) {
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const json* a, const json* b) { return rate(*a) > rate(*b); });
  json labels = json::array();
  for (const auto* r : rows)
    labels.push_back(r->value("label", ""));
  return labels;
}

} // namespace

std::optional<double> number_at(const json& j, const char* key) {
  if (!j.is_object())
    return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number())
    return std::nullopt;
  return it->get<double>();
}

std::vector<size_t> ranking(const json& runs) {
  std::vector<size_t> order(runs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto before = [&](size_t a, size_t b) {
    auto ta = reached_seconds(runs[a]);
    auto tb = reached_seconds(runs[b]);
    if (ta && tb)
      return *ta < *tb;
    if (ta || tb)
      return ta.has_value();
    return number_at(summary_of(runs[a]), "best_accuracy").value_or(0) >
           number_at(summary_of(runs[b]), "best_accuracy").value_or(0);
  };
  std::stable_sort(order.begin(), order.end(), before);
  return order;
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

json prediction_check(const json& runs) {
  json rows = json::array();
  std::vector<const json*> predicted;
  double abs_error = 0;
  for (const auto& run : runs) {
    auto measured = number_at(summary_of(run), "step_seconds");
    auto guess = run.contains("predicted") ? number_at(run["predicted"], "step_seconds")
                                           : std::nullopt;
    if (!measured || !guess || *measured <= 0)
      continue;
    double error = (*guess - *measured) / *measured * 100;
    abs_error += std::fabs(error);
    rows.push_back({{"label", run.value("label", "")},
                    {"strategy", run.value("strategy", "")},
                    {"measured_step_seconds", *measured},
                    {"predicted_step_seconds", *guess},
                    {"error_percent", error}});
    predicted.push_back(&run);
  }
  if (rows.empty())
    return nullptr;
  auto measured_ranking = labels_by_rate(predicted, [](const json& r) {
    return number_at(summary_of(r), "samples_per_second").value_or(0);
  });
  auto predicted_ranking =
    labels_by_rate(predicted, [](const json& r) { return predicted_rate(r).value_or(0); });
  return {{"runs", rows},
          {"measured_ranking", measured_ranking},
          {"predicted_ranking", predicted_ranking},
          {"ranking_matches", measured_ranking == predicted_ranking},
          {"mean_abs_error_percent", abs_error / static_cast<double>(rows.size())}};
}

} // namespace baton::apps
