#include "apps/compare/repeats.hpp"

#include <algorithm>

namespace baton::apps {

namespace {

using nlohmann::json;

/// The figures a repeated row gives the median and the spread of.
const char* spread_keys[] = {"time_to_target_seconds", "samples_per_second", "step_seconds",
                             "steady_step_seconds"};

bool reached(const json& record) {
  return record["summary"].value("reached", false);
}

/// Orders the runs of one strategy: reached first, by time to target; then
/// by samples per second, highest first.
bool faster(const json& a, const json& b) {
  if (reached(a) != reached(b))
    return reached(a);
  const auto& sa = a["summary"];
  const auto& sb = b["summary"];
  if (reached(a) && sa["time_to_target_seconds"] != sb["time_to_target_seconds"])
    return sa["time_to_target_seconds"].get<double>() < sb["time_to_target_seconds"].get<double>();
  return sa.value("samples_per_second", 0.0) > sb.value("samples_per_second", 0.0);
}

json repeat_entry(const json& record, size_t round) {
  json entry{{"round", round},
             {"command", record.value("command", "")},
             {"log", record.value("log", "")}};
  if (record.contains("summary"))
    entry["summary"] = record["summary"];
  else
    entry["failed"] = record.value("failed", "");
  return entry;
}

} // namespace

json spread_of(const json& values) {
  std::vector<double> sorted;
  for (const auto& v : values) {
    if (!v.is_number())
      return {{"median", nullptr}, {"min", nullptr}, {"max", nullptr}, {"values", values}};
    sorted.push_back(v.get<double>());
  }
  if (sorted.empty())
    return {{"median", nullptr}, {"min", nullptr}, {"max", nullptr}, {"values", values}};
  std::sort(sorted.begin(), sorted.end());
  auto n = sorted.size();
  double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return {{"median", median}, {"min", sorted.front()}, {"max", sorted.back()}, {"values", values}};
}

json combine_repeats(const std::vector<json>& records) {
  json repeats = json::array();
  std::vector<json> finished;
  for (size_t i = 0; i < records.size(); ++i) {
    repeats.push_back(repeat_entry(records[i], i + 1));
    if (records[i].contains("summary"))
      finished.push_back(records[i]);
  }
  if (finished.empty()) {
    json row = records.front();
    row["repeats"] = repeats;
    return row;
  }
  auto ordered = finished;
  std::stable_sort(ordered.begin(), ordered.end(), faster);
  // The lower middle of an even count: a run that was measured, not a mean.
  json row = ordered[(ordered.size() - 1) / 2];
  json spread{{"runs", finished.size()}, {"failed", records.size() - finished.size()}};
  size_t reached_runs = 0;
  for (const auto& r : finished)
    reached_runs += reached(r) ? 1 : 0;
  spread["reached"] = reached_runs;
  auto& summary = row["summary"];
  for (const char* key : spread_keys) {
    json values = json::array();
    for (const auto& r : finished)
      values.push_back(r["summary"].value(key, json{}));
    spread[key] = spread_of(values);
    summary[key] = spread[key]["median"];
  }
  // A strategy reaches the target when every run of it does: one run that
  // missed it is part of what the strategy does on this cluster.
  summary["reached"] = reached_runs == finished.size();
  if (!summary["reached"].get<bool>())
    summary["epochs_to_target"] = nullptr;
  row["spread"] = spread;
  row["repeats"] = repeats;
  return row;
}

} // namespace baton::apps
