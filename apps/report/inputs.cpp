#include "apps/report/inputs.hpp"

#include <filesystem>
#include <set>
#include <sstream>

#include "apps/compare/run_record.hpp"
#include "apps/report/input_check.hpp"
#include "apps/report/machine.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace {

using nlohmann::json;

/// What the kinds of input look like, for the error naming a file of another kind.
constexpr const char* expected_kinds =
  "expected a metrics JSON of `baton run --metrics-out` (with \"heads\"), a report.json of "
  "`baton compare` or `baton report` (\"schema\": \"baton-report/1\") or a bench's --json "
  "with a \"runs\" array";

bool is_metrics(const json& j) {
  return j.is_object() && j.contains("heads") && j["heads"].is_array() && j.contains("mode");
}

bool has_runs(const json& j) {
  return j.is_object() && j.contains("runs") && j["runs"].is_array();
}

/// A run record read from `path`, checked, summarized again for `target`.
caf::expected<json> checked_record(json run, const std::string& path,
                                   std::optional<double> target) {
  if (!run.is_object() || !is_metrics(run.value("metrics", json{})))
    return make_error(errc::bad_file, path + ": a run in \"runs\" without the metrics of a run "
                                             "(\"metrics\" with \"heads\")");
  if (target || !run.contains("summary"))
    run["summary"] = summarize(run["metrics"], target, run.value("settings", json::object()));
  run["label"] = run.value("label", run.value("strategy", "run"));
  run.emplace("strategy", run["metrics"].value("mode", ""));
  run.emplace("command", "");
  run.emplace("source", path);
  return run;
}

json metrics_record(const json& metrics, const std::string& path, std::optional<double> target) {
  auto strategy = metrics.value("run", "") == "local" ? std::string{"local"}
                                                       : metrics.value("mode", "");
  auto label = std::filesystem::path{path}.stem().string();
  auto run = run_record(label, strategy, "", metrics, target);
  run["source"] = path;
  return run;
}

/// The header fields of a report.json that the new report keeps (not its
/// title: that counts its own runs).
void take_header(json& report, const json& from) {
  for (const char* key : {"workload", "cluster", "machine", "skipped", "predictions"})
    if (from.contains(key) && !report.contains(key))
      report[key] = from[key];
  if (from.contains("target") && !report.contains("target"))
    report["target"] = from["target"];
}

/// Adds the runs of the file at `path` to `report`.
caf::expected<void> add_file(json& report, const std::string& path, std::optional<double> target) {
  auto j = read_input_json(path);
  if (!j)
    return j.error();
  if (is_metrics(*j)) {
    if (auto checked = check_metrics_file(*j, path); !checked)
      return checked;
    report["runs"].push_back(metrics_record(*j, path, target));
    return {};
  }
  if (!has_runs(*j))
    return make_error(errc::bad_file, path + ": JSON of another kind: " + expected_kinds);
  if (auto checked = check_runs_file(*j, path); !checked)
    return checked;
  for (auto& run : (*j)["runs"]) {
    auto record = checked_record(std::move(run), path, target);
    if (!record)
      return record.error();
    report["runs"].push_back(std::move(*record));
  }
  if (j->value("schema", "") == "baton-report/1")
    take_header(report, *j);
  return {};
}

/// Labels made unique: a second "ring" becomes "ring (2)".
void unique_labels(json& runs) {
  std::set<std::string> seen;
  for (auto& run : runs) {
    auto base = run["label"].get<std::string>();
    auto label = base;
    for (int n = 2; seen.count(label); ++n)
      label = base + " (" + std::to_string(n) + ")";
    seen.insert(label);
    run["label"] = label;
  }
}

} // namespace

caf::expected<json> report_from_files(const std::vector<std::string>& files,
                                      std::optional<double> target) {
  json report = {{"runs", json::array()}};
  if (target)
    report["target"] = *target;
  for (const auto& path : files)
    if (auto added = add_file(report, path, target); !added)
      return added.error();
  if (!target && !report.contains("target"))
    report["target"] = nullptr;
  unique_labels(report["runs"]);
  if (!report.contains("machine")) {
    report["machine"] = this_machine();
    report["machine"]["note"] = "The runs were read from files that do not record the machine: "
                                "this is the machine that drew the report.";
  }
  report.emplace("cluster", json{{"description", "not recorded in metrics files (each run's "
                                                 "metrics list its nodes)"}});
  report.emplace("skipped", json::array());
  report.emplace("title", "baton report: " + std::to_string(report["runs"].size()) + " runs");
  return report;
}

} // namespace baton::apps
