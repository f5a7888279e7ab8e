#include "apps/compare/compare.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actors/config/topology_file.hpp"
#include "actors/modes/registry.hpp"
#include "apps/bench/bench.hpp"
#include "apps/compare/repeats.hpp"
#include "apps/compare/run_record.hpp"
#include "apps/compare/strategies.hpp"
#include "apps/predict/predict.hpp"
#include "apps/predict/profile_cache.hpp"
#include "apps/report/analysis.hpp"
#include "apps/report/machine.hpp"
#include "apps/report/report.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::apps {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// `baton compare` options.
struct compare_request {
  std::string workload;
  /// The workload file's text, read once before any strategy is derived
  /// from it: every row, and the predictions made after the runs, are of
  /// the workload as it was then (a file edited meanwhile changes none).
  std::string workload_text;
  std::string strategies; ///< "" = all that apply
  int32_t local_nodes = 0;
  std::string link;
  std::optional<double> target;
  double budget = 0;      ///< seconds of training per run (0: none)
  int32_t repeat = 0;     ///< runs of each strategy (0: the default, default_repeat())
  std::string out = "compare-out";
  std::vector<std::string> overrides;
  std::vector<int32_t> predict_hosts;
  std::optional<double> bandwidth, latency;
  int32_t hosts() const { return local_nodes > 0 ? local_nodes : 2; }
};

/// A strategy of the comparison: ready to run, or skipped with its reason.
struct row {
  strategy_choice strategy;
  std::string label;      ///< file names: "data-parallel-ring"
  std::string topology;   ///< DIR/LABEL.yaml
  std::vector<std::string> overrides, flags;
  std::string model;      ///< what it trains
  std::string skipped;    ///< why it does not run ("" runs)
};

/// `x` as the shortest text that reads back the same ("0.85", "120").
std::string number_text(double x) {
  std::ostringstream out;
  out.precision(15);
  out << x;
  return out.str();
}

std::string label_of(const std::string& name) {
  auto label = name;
  std::replace(label.begin(), label.end(), ':', '-');
  return label;
}

bool fail_input(const std::string& text) {
  std::fprintf(stderr, "baton compare: %s\n", text.c_str());
  return false;
}

/// "--predict 2,4,8": host counts.
bool parse_hosts(const std::string& flag, const std::string& text, std::vector<int32_t>& out) {
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ',')) {
    int32_t n = 0;
    if (!parse_in_range(flag, item, 1, 1024, n))
      return false;
    out.push_back(n);
  }
  return !out.empty() || fail_input(flag + " expects host counts, e.g. 4,8,16");
}

bool read_flag(args& a, const std::string& flag, compare_request& r) {
  std::string v;
  double x = 0;
  if (flag == "--strategies")
    return a.value(flag, r.strategies);
  if (flag == "--local-nodes")
    return a.value(flag, v) && parse_in_range(flag, v, 1, 64, r.local_nodes);
  if (flag == "--link")
    return a.value(flag, v) && parse_link(flag, v, r.link);
  if (flag == "--target")
    return a.value(flag, v) && parse_positive(flag, v, x) && (r.target = x, true);
  if (flag == "--budget") // at most a year: more is a typo, not a budget
    return a.value(flag, v)
           && parse_number_in(flag, v, 1e-3, 365 * 24 * 3600.0,
                              "a number of seconds from 0.001 to 31536000 (a year)", r.budget);
  if (flag == "--repeat")
    return a.value(flag, v) && parse_in_range(flag, v, 1, 100, r.repeat);
  if (flag == "--out")
    return a.value(flag, r.out);
  if (flag == "--set")
    return a.value(flag, v) && (r.overrides.push_back(v), true);
  if (flag == "--predict")
    return a.value(flag, v) && parse_hosts(flag, v, r.predict_hosts);
  if (flag == "--bandwidth")
    return a.value(flag, v) && parse_bandwidth(flag, v, x) && (r.bandwidth = x, true);
  if (flag == "--latency")
    return a.value(flag, v) && parse_latency(flag, v, x) && (r.latency = x, true);
  if (!flag.empty() && flag[0] != '-' && r.workload.empty())
    return (r.workload = flag, true);
  return false;
}

/// The checks of the flags together; a message and false when they fail.
bool check_request(const compare_request& r) {
  if (r.workload.empty())
    return fail_input("expects a workload file: baton compare WORKLOAD.yaml [flags]");
  if (!r.link.empty() && r.local_nodes < 1)
    return fail_input("--link needs --local-nodes N (it shapes the links between the local "
                      "node processes)");
  if (r.target && *r.target > 1)
    return fail_input("--target " + number_text(*r.target) + " is outside (0, 1]: a test "
                      "accuracy (0.85 for 85%)");
  if (r.target && *r.target >= 1 && r.budget <= 0)
    return fail_input("--target 1 (every test sample right) is not reached on a real test set, "
                      "and without --budget SECONDS each strategy would train every epoch to "
                      "find out: give a lower target or a budget");
  if ((r.bandwidth || r.latency) && r.predict_hosts.empty())
    return fail_input("--bandwidth and --latency are the cost model's: they need --predict "
                      "HOSTS");
  return true;
}

// -- the rows ---------------------------------------------------------------------

/// The row of `s`: its topology written to DIR, its overrides, and whether
/// it applies (the parser's and the plan's answer, and the model: a
/// strategy that would train another model than `reference` is skipped).
row make_row(strategy_choice s, const compare_request& r) {
  row out{s, label_of(s.name)};
  out.topology = r.out + "/" + out.label + ".yaml";
  auto text = derive_topology(s, r.workload_text, r.workload, r.overrides);
  if (!text)
    return out.skipped = describe(text.error()), out;
  if (auto why = model::try_replace_file(out.topology, *text); !why.empty())
    return out.skipped = why, out;
  auto overrides = run_overrides(out.strategy, *text, r.workload, r.overrides);
  if (!overrides)
    return out.skipped = describe(overrides.error()), out;
  out.overrides = *overrides;
  if (r.target)
    out.overrides.push_back("target_accuracy=" + number_text(*r.target));
  if (r.budget > 0)
    out.overrides.push_back("runtime.stop_after_seconds=" + number_text(r.budget));
  out.flags = s.flags;
  if (s.distributed && r.local_nodes > 0)
    out.flags = with_link({"--local-nodes", std::to_string(r.local_nodes)}, r.link);
  auto model = applies(s, out.topology, out.overrides, r.hosts());
  if (!model)
    return out.skipped = describe(model.error()), out;
  out.model = *model;
  return out;
}

/// The model of the workload: what `local` trains (asked even when it is
/// not chosen, so that a strategy named alone is checked against the
/// workload, not against itself); "" when local does not apply.
std::string reference_model(const compare_request& c) {
  auto all = all_strategies(c.hosts());
  auto reference = std::find_if(all.begin(), all.end(), [](auto& s) { return !s.distributed; });
  if (reference == all.end())
    return {};
  auto local = make_row(*reference, c);
  std::error_code ec;
  fs::remove(local.topology, ec);
  return local.skipped.empty() ? local.model : std::string{};
}

/// The rows of `chosen`; one that would train another model than local's
/// is skipped, and when local does not apply, another model than the first
/// row's that does (rows of different models are no comparison).
std::vector<row> make_rows(const std::vector<strategy_choice>& chosen, const compare_request& r) {
  auto model = reference_model(r);
  std::vector<row> rows;
  for (const auto& s : chosen)
    rows.push_back(make_row(s, r));
  std::string whose = "the workload's";
  const auto first = std::find_if(rows.begin(), rows.end(),
                                  [](const row& x) { return x.skipped.empty(); });
  if (model.empty() && first != rows.end()) {
    model = first->model;
    whose = first->strategy.name + "'s (local does not apply)";
  }
  for (auto& row : rows) {
    if (!row.skipped.empty() || row.model == model)
      continue;
    const auto* mode = actors::find_mode(row.strategy.job);
    const std::string trains = mode != nullptr ? mode->schema.trains : std::string{};
    row.skipped = row.strategy.name + " trains " + row.model + ", not " + whose + " " + model +
                  (trains.empty() ? "" : " (" + trains + ")");
  }
  return rows;
}

// -- running ------------------------------------------------------------------------

/// The last "epoch N ... test accuracy A%" of a run's log: its progress.
std::pair<int, std::string> last_epoch(const std::string& log) {
  std::ifstream in{log};
  std::string line, accuracy;
  int epoch = 0;
  while (std::getline(in, line)) {
    // "info epoch 3 workers test accuracy 81.20% ..." (actors) or "info
    // local data-parallel reference: epoch 3 test accuracy 81.20%" (local).
    auto acc = line.find("test accuracy");
    auto at = line.rfind("epoch ", acc);
    if (acc == std::string::npos || at == std::string::npos || line.find(" info ") > at)
      continue;
    epoch = std::atoi(line.c_str() + at + 6);
    std::stringstream rest{line.substr(acc + 13)};
    rest >> accuracy;
  }
  return {epoch, accuracy};
}

int64_t epochs_of(const row& r) {
  auto prefix = std::string{"data.epochs="};
  for (auto it = r.overrides.rbegin(); it != r.overrides.rend(); ++it)
    if (it->rfind(prefix, 0) == 0)
      return std::atoll(it->c_str() + prefix.size());
  std::ifstream in{r.topology};
  std::string line;
  bool data = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ')
      data = line.rfind("data:", 0) == 0;
    if (auto at = line.find("epochs:"); data && at != std::string::npos && line[0] == ' ')
      return std::atoll(line.c_str() + at + 7);
  }
  return 1;
}

/// Prints "[i/n] NAME  epoch E/N  accuracy A  T s  ETA" every 5 s (one
/// line each: a log read by a test or a pipe stays readable).
class progress {
public:
  progress(const row& r, const std::string& label, size_t i, size_t n, const compare_request& c)
      : name_(r.strategy.name), log_(c.out + "/" + label + ".log"), i_(i), n_(n),
        epochs_(epochs_of(r)), budget_(c.budget), start_(std::chrono::steady_clock::now()),
        last_(start_) {}

  void operator()() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(5))
      return;
    last_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    auto [epoch, accuracy] = last_epoch(log_);
    std::string eta = "?";
    if (epoch > 0)
      eta = std::to_string(static_cast<int>(elapsed / epoch * (epochs_ - epoch))) + " s";
    if (budget_ > 0)
      eta += " (budget: " + std::to_string(static_cast<int>(std::max(0.0, budget_ - elapsed))) +
             " s left)";
    std::printf("  [%zu/%zu] %-24s epoch %d/%lld  accuracy %s  %.0f s  ETA %s\n", i_, n_,
                name_.c_str(), epoch, static_cast<long long>(epochs_),
                accuracy.empty() ? "-" : accuracy.c_str(), elapsed, eta.c_str());
    std::fflush(stdout);
  }

private:
  std::string name_, log_;
  size_t i_, n_;
  int64_t epochs_;
  double budget_;
  std::chrono::steady_clock::time_point start_, last_;
};

/// ": " and the last error line of a run's log ("" when none).
std::string last_error(const std::string& log) {
  std::ifstream in{log};
  std::string line, last;
  while (std::getline(in, line))
    if (auto at = line.find(" error "); at != std::string::npos)
      last = line.substr(at + 7);
  return last.empty() ? last : ": " + last;
}

json settings_of(const row& r, int32_t hosts) {
  int64_t batch = 0;
  for (const auto& o : r.overrides)
    if (o.rfind("data.batch_size=", 0) == 0)
      batch = std::atoll(o.c_str() + 16);
  return {{"global_batch", batch * r.strategy.batch_split},
          {"microbatches_per_step", r.strategy.microbatches_per_step},
          {"hosts", r.strategy.distributed ? hosts : 1},
          {"model", r.model}};
}

/// Runs round `round` of `r` (its files DIR/LABEL-ROUND.*) and returns its
/// record; a run without metrics is a record with "failed" and no summary.
json run_row(const row& r, int32_t round, size_t i, size_t n, const compare_request& c,
             const std::atomic<bool>* interrupted) {
  auto label = r.label + "-" + std::to_string(round);
  auto log = c.out + "/" + label + ".log";
  progress show{r, label, i, n, c};
  std::printf("[%zu/%zu] %s (run %d): %s\n", i, n, r.strategy.name.c_str(), round,
              r.strategy.summary.c_str());
  std::fflush(stdout);
  auto command = side_command(r.topology, r.overrides, r.flags, c.out, label);
  auto done = run_side(r.topology, r.overrides, r.flags, c.out, label, interrupted,
                       [&] { show(); });
  std::ifstream in{c.out + "/" + label + ".json"};
  auto metrics = json::parse(in, nullptr, false);
  if (!done || metrics.is_discarded() || !metrics.is_object()) {
    auto why = !done ? describe(done.error()) : std::string{"no metrics written"};
    why = why.substr(0, why.find("; its log")) + last_error(log);
    return {{"label", r.strategy.name}, {"strategy", r.strategy.name}, {"command", command},
            {"failed", why}, {"log", log}};
  }
  auto record = run_record(r.strategy.name, r.strategy.name, command, metrics, c.target,
                           settings_of(r, c.hosts()));
  record["log"] = log;
  return record;
}

// -- the table ----------------------------------------------------------------------

std::string bytes_text(const json& v) {
  if (!v.is_number())
    return "-";
  double b = v.get<double>();
  const char* units[] = {"B", "KB", "MB", "GB"};
  int u = 0;
  while (b >= 1000 && u < 3)
    b /= 1000, ++u;
  char text[32];
  std::snprintf(text, sizeof text, b < 10 && u > 0 ? "%.1f %s" : "%.0f %s", b, units[u]);
  return text;
}

/// `x` in `format` (one %f): "12.3 s".
std::string format_text(const char* format, double x) {
  char text[64];
  std::snprintf(text, sizeof text, format, x);
  return text;
}

/// The row's `key`, a repeated run's median, in `format` (its value over
/// `divisor`), with the min-max of its runs in `range_format` after it:
/// "950 (900-990)".
std::string median_text(const json& r, const char* key, const char* format,
                        const char* range_format, double divisor = 1) {
  const auto& v = r["summary"][key];
  if (!v.is_number())
    return "-";
  auto text = format_text(format, v.get<double>() / divisor);
  const auto& spread = r.value("spread", json::object());
  if (spread.value("runs", 1) < 2 || !spread.contains(key) || !spread[key]["min"].is_number())
    return text;
  auto range = [&](const char* end) {
    return format_text(range_format, spread[key][end].get<double>() / divisor);
  };
  return text + " (" + range("min") + "-" + range("max") + ")";
}

std::string time_text(const json& r) {
  const auto& s = r["summary"];
  if (s["reached"].get<bool>()) {
    const int digits = seconds_digits(s["time_to_target_seconds"].get<double>());
    const std::string format = "%." + std::to_string(digits) + "f";
    return median_text(r, "time_to_target_seconds", (format + " s").c_str(), format.c_str());
  }
  if (s["epochs_run"].get<int64_t>() == 0)
    return "not reached, no epoch evaluated";
  auto text = format_text("not reached, best %.1f%%", 100 * s["best_accuracy"].get<double>());
  const auto& spread = r.value("spread", json::object());
  if (spread.value("reached", 0) > 0)
    text += " (" + std::to_string(spread["reached"].get<int>()) + "/" +
            std::to_string(spread["runs"].get<int>()) + " reached)";
  return text;
}

std::optional<double> local_time(const json& runs) {
  for (const auto& r : runs)
    if (r["strategy"] == "local" && r.contains("summary") && r["summary"]["reached"].get<bool>())
      return r["summary"]["time_to_target_seconds"].get<double>();
  return std::nullopt;
}

void print_row(const json& r, std::optional<double> local, bool recommended) {
  auto name = (recommended ? "> " : "  ") + r["strategy"].get<std::string>();
  if (!r.contains("summary")) {
    std::printf("%-26s failed: %s\n", name.c_str(), r["failed"].get<std::string>().c_str());
    return;
  }
  const auto& s = r["summary"];
  const auto& split = s["time_split"];
  char split_text[32], speedup[16] = "-", epochs[16] = "-";
  std::snprintf(split_text, sizeof split_text, "%.0f/%.0f/%.0f",
                100 * split["compute"].get<double>(), 100 * split["communication"].get<double>(),
                100 * split["waiting"].get<double>());
  if (local && s["reached"].get<bool>())
    std::snprintf(speedup, sizeof speedup, "%.2fx",
                  *local / s["time_to_target_seconds"].get<double>());
  if (s["epochs_to_target"].is_number())
    std::snprintf(epochs, sizeof epochs, "%lld", s["epochs_to_target"].get<long long>());
  std::printf("%-26s %-32s %-20s %-20s %6s %10s %10s %9s %5.0f%% %11s %8s\n", name.c_str(),
              time_text(r).c_str(), median_text(r, "samples_per_second", "%.0f", "%.0f").c_str(),
              median_text(r, "step_seconds", "%.1f ms", "%.1f", 1e-3).c_str(), epochs,
              bytes_text(s["bytes_per_step"]).c_str(), bytes_text(s["bytes_per_epoch"]).c_str(),
              bytes_text(s["peak_rss_bytes"]).c_str(), 100 * s["cpu_utilisation"].get<double>(),
              split_text, speedup);
}

/// The recommendation's sentence, then the table, ranked; "> " marks the
/// rows it names.
void print_table(const json& report) {
  auto recommendation = report.value("recommendation", json{{"winners", json::array()}});
  const auto& recommended = recommendation["winners"];
  if (recommendation.contains("sentence"))
    std::printf("\n%s\n", recommendation["sentence"].get<std::string>().c_str());
  std::printf("\n%-26s %-32s %-20s %-20s %6s %10s %10s %9s %6s %11s %8s\n", "  strategy",
              "time to target", "samples/s", "step", "epochs", "bytes/step", "bytes/ep.",
              "peak mem", "CPU", "comp/comm/wait", "speedup");
  auto local = local_time(report["runs"]);
  for (const auto& r : report["runs"])
    print_row(r, local,
              std::find(recommended.begin(), recommended.end(), r["label"]) != recommended.end());
  if (report.value("repeat", 1) > 1)
    std::printf("each figure: the median of %d runs of the strategy, (min-max) after it; CPU: "
                "over the training time\n",
                report["repeat"].get<int>());
  for (const auto& s : report["skipped"])
    std::printf("skipped %-16s %s\n", s["strategy"].get<std::string>().c_str(),
                s["reason"].get<std::string>().c_str());
  std::fflush(stdout);
}

// -- the report -----------------------------------------------------------------------

/// This machine as report.json has it: this_machine()'s fields, and under
/// the names compare's reports gave them first (cpus, cpu_model, kernel).
json machine() {
  auto m = this_machine();
  m["cpus"] = m["cores"];
  m["cpu_model"] = m["cpu"];
  m["kernel"] = m["os"];
  return m;
}

std::string now_text() {
  auto t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

json report_header(const compare_request& r) {
  return {{"schema", "baton-report/1"},
          {"created", now_text()},
          {"workload", {{"file", r.workload}, {"overrides", r.overrides},
                        {"target", r.target ? json(*r.target) : json(nullptr)},
                        {"budget_seconds", r.budget > 0 ? json(r.budget) : json(nullptr)}}},
          {"cluster", {{"local_nodes", r.local_nodes}, {"link", r.link}}},
          {"machine", machine()},
          {"runs", json::array()},
          {"skipped", json::array()}};
}

/// What --predict asks of the cost model: the strategies of `rows` that ran.
predict_request prediction_request(const compare_request& r, const std::vector<row>& rows) {
  predict_request p;
  p.workload = r.workload;
  p.workload_text = r.workload_text;
  p.overrides = r.overrides;
  for (const auto& row : rows)
    if (row.skipped.empty())
      p.strategies += (p.strategies.empty() ? "" : ",") + row.strategy.name;
  p.measured_hosts = {r.hosts()};
  p.hosts = r.predict_hosts;
  if (r.bandwidth)
    p.bandwidths = {*r.bandwidth};
  p.latency = r.latency;
  p.link = r.link;
  return p;
}

/// --predict: the predictions' profiles taken after each round's runs, in
/// the host's windows those runs had: after the first round every model the
/// predictions need (profile_models: nothing simulated yet), after the
/// others each of them again (profile_cache::profile_again). Nothing is
/// said of a failure here: add_predictions says it.
void profile_in_round(int32_t round, const compare_request& r, const std::vector<row>& rows,
                      profile_cache& profiles, const std::atomic<bool>* interrupted) {
  if (r.predict_hosts.empty() || stop_requested(interrupted))
    return;
  if (round == 1)
    (void)profile_models(prediction_request(r, rows), profiles);
  else
    profiles.profile_again();
}

/// What a run record's planning settled (its metrics' "settled" strings),
/// none when its metrics have none or not as strings.
std::vector<std::string> settled_of(const json& run) {
  std::vector<std::string> out;
  auto m = run.find("metrics");
  if (m == run.end() || !m->is_object())
    return out;
  for (const auto& key : m->value("settled", json::array()))
    if (key.is_string())
      out.push_back(key.get<std::string>());
  return out;
}

/// The cost model's predictions (--predict) from `profiles`, each run's
/// measured configuration copied into its record's "predicted". A row's
/// measured configuration is predicted with what its median run's planning
/// settled (its metrics' "settled": a pipeline's stages), not planned again.
void add_predictions(json& report, const compare_request& r, const std::vector<row>& rows,
                     profile_cache& profiles, const std::atomic<bool>* interrupted) {
  auto request = prediction_request(r, rows);
  for (const auto& run : report["runs"])
    if (auto settled = settled_of(run); !settled.empty())
      request.settled[run.value("strategy", "")] = settled;
  request.progress = [](const std::string& what) {
    std::printf("predictions: %s\n", what.c_str());
    std::fflush(stdout);
  };
  auto predicted = predict(request, interrupted, &profiles);
  if (!predicted) {
    std::printf("predictions: %s\n", describe(predicted.error()).c_str());
    report["predictions"] = {{"error", describe(predicted.error())}};
    return;
  }
  report["predictions"] = *predicted;
  for (auto& run : report["runs"])
    for (const auto& m : predicted->value("measured", json::array()))
      if (m.value("strategy", "") == run["strategy"] && m.value("hosts", 0) == r.hosts() &&
          run.contains("summary") && run["strategy"] != "local")
        run["predicted"] = m;
}

/// The default --repeat after the first round, which took `first` seconds:
/// 3, or 1 when three rounds would not fit the budget the user gave (each
/// strategy's --budget, once: `strategies` x budget seconds).
int32_t default_repeat(const compare_request& r, size_t strategies, double first) {
  constexpr int32_t repeats = 3;
  if (r.budget <= 0 || repeats * first <= static_cast<double>(strategies) * r.budget)
    return repeats;
  std::printf("--repeat defaults to 1: %d rounds would take about %.0f s, more than the budget "
              "of %zu strategies x %.0f s; give --repeat %d to run them anyway\n",
              repeats, repeats * first, strategies, r.budget, repeats);
  return 1;
}

/// Runs every strategy of `rows` N times, interleaved (A B C A B C ...) so
/// that a slow spell of the host hits all of them, and puts each
/// strategy's row (combine_repeats) into report["runs"], ranked. Returns N.
int32_t run_rounds(const std::vector<const row*>& rows, const compare_request& r, json& report,
                   const std::function<void(int32_t)>& after_round,
                   const std::atomic<bool>* interrupted) {
  std::vector<std::vector<json>> records(rows.size());
  // Without --repeat the rounds are known after the first: 3 until then.
  int32_t rounds = r.repeat > 0 ? r.repeat : 3;
  size_t i = 0;
  auto first_started = std::chrono::steady_clock::now();
  for (int32_t round = 1; round <= rounds; ++round) {
    for (size_t k = 0; k < rows.size() && !stop_requested(interrupted); ++k)
      records[k].push_back(run_row(*rows[k], round, ++i, rows.size() * rounds, r, interrupted));
    if (round == 1 && r.repeat == 0) {
      auto first = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_started);
      rounds = default_repeat(r, rows.size(), first.count());
    }
    after_round(round);
  }
  json runs = json::array();
  for (const auto& strategy : records)
    if (!strategy.empty())
      runs.push_back(combine_repeats(strategy));
  for (auto index : ranking(runs))
    report["runs"].push_back(runs[index]);
  report["recommendation"] = recommendation(report["runs"], report["workload"]["target"]);
  return rounds;
}

int compare(const compare_request& r, const std::vector<strategy_choice>& chosen, bool named,
            const std::atomic<bool>* interrupted) {
  std::error_code ec;
  fs::create_directories(r.out, ec);
  if (ec) {
    std::fprintf(stderr, "baton compare: cannot create '%s': %s\n", r.out.c_str(),
                 ec.message().c_str());
    return 2;
  }
  auto rows = make_rows(chosen, r);
  json report = report_header(r);
  for (const auto& row : rows) {
    if (row.skipped.empty())
      continue;
    if (named) {
      std::fprintf(stderr, "baton compare: %s does not apply to %s: %s\n",
                   row.strategy.name.c_str(), r.workload.c_str(), row.skipped.c_str());
      return 2;
    }
    report["skipped"].push_back({{"strategy", row.strategy.name}, {"reason", row.skipped}});
  }
  size_t n = std::count_if(rows.begin(), rows.end(), [](auto& x) { return x.skipped.empty(); });
  if (n == 0) {
    print_table(report);
    std::fprintf(stderr, "baton compare: no strategy applies to %s\n", r.workload.c_str());
    return 2;
  }
  std::printf("baton compare %s: %zu strategies on %s, %s\n", r.workload.c_str(), n,
              r.local_nodes > 0 ? (std::to_string(r.local_nodes) + " local nodes").c_str()
                                : "one process",
              r.link.empty() ? "loopback" : ("--link " + r.link).c_str());
  std::vector<const row*> running;
  for (const auto& row : rows)
    if (row.skipped.empty())
      running.push_back(&row);
  profile_cache profiles;
  report["repeat"] = run_rounds(
    running, r, report,
    [&](int32_t round) { profile_in_round(round, r, rows, profiles, interrupted); }, interrupted);
  if (!r.predict_hosts.empty() && !stop_requested(interrupted))
    add_predictions(report, r, rows, profiles, interrupted);
  print_table(report);
  if (auto written = write_report(report, r.out); !written) {
    std::fprintf(stderr, "baton compare: the report: %s\n", describe(written.error()).c_str());
    if (auto why = model::try_replace_file(r.out + "/report.json", report.dump(2) + "\n");
        !why.empty())
      std::fprintf(stderr, "baton compare: %s\n", why.c_str());
  }
  std::printf("report: %s/report.json, %s/report.html\n", r.out.c_str(), r.out.c_str());
  return stop_requested(interrupted) ? interrupted_exit_code : 0;
}

} // namespace

int cmd_compare(args& a, const std::atomic<bool>* interrupted) {
  compare_request r;
  if (!read_flags(a, "baton compare", [&](const std::string& f) { return read_flag(a, f, r); }))
    return 2;
  if (!check_request(r))
    return 2;
  // As `baton run` reads it: its size limit, and a directory or a device refused by name.
  auto text = actors::read_topology_file(r.workload);
  if (!text) {
    std::fprintf(stderr, "baton compare: %s\n", describe(text.error()).c_str());
    return 2;
  }
  r.workload_text = std::move(*text);
  bool named = !r.strategies.empty();
  auto chosen = named ? choose_strategies(r.strategies, r.hosts())
                      : caf::expected<std::vector<strategy_choice>>{all_strategies(r.hosts())};
  if (!chosen) {
    std::fprintf(stderr, "baton compare: %s\n", describe(chosen.error()).c_str());
    return 2;
  }
  return compare(r, *chosen, named, interrupted);
}

} // namespace baton::apps
