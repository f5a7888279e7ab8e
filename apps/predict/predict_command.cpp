// `baton predict WORKLOAD.yaml [flags]`: reads the flags, calls predict()
// and prints its tables (docs/cost-model.md).

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "apps/bench/bench.hpp"
#include "apps/predict/predict.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::apps {

namespace {

using json = nlohmann::json;

/// A comma-separated list, each item read by `parse_one`.
template <class T, class Parse>
bool parse_list(const std::string& flag, const std::string& text, std::vector<T>& out,
                Parse&& parse_one) {
  out.clear();
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ','))
    if (T value; parse_one(flag, item, value))
      out.push_back(value);
    else
      return false;
  if (out.empty())
    std::fprintf(stderr, "baton: %s expects a comma-separated list, got '%s'\n", flag.c_str(),
                 text.c_str());
  return !out.empty();
}

bool parse_hosts(const std::string& flag, const std::string& text, int32_t& out) {
  return parse_in_range(flag, text, 1, 64, out);
}

struct command_line {
  predict_request request;
  std::string json_out;
};

/// Reads the flags after the workload; false (with the error printed) on a bad one.
bool read_predict_flags(args& a, command_line& c) {
  auto& r = c.request;
  return read_flags(a, "baton predict", [&](const std::string& flag) {
    std::string v;
    if (flag == "--strategies")
      return a.value(flag, r.strategies);
    if (flag == "--hosts")
      return a.value(flag, v) && parse_list(flag, v, r.hosts, parse_hosts);
    if (flag == "--measured-hosts")
      return a.value(flag, v) && parse_list(flag, v, r.measured_hosts, parse_hosts);
    if (flag == "--bandwidth")
      return a.value(flag, v) && parse_list(flag, v, r.bandwidths, parse_bandwidth);
    if (flag == "--latency") {
      double latency = 0;
      if (!a.value(flag, v) || !parse_latency(flag, v, latency))
        return false;
      r.latency = latency;
      return true;
    }
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    if (flag == "--profile")
      return a.value(flag, r.profile);
    if (flag == "--json")
      return a.value(flag, c.json_out) && writable_output(flag, c.json_out);
    if (flag == "--out")
      return a.value(flag, r.cache_dir);
    if (flag == "--set") {
      if (!a.value(flag, v))
        return false;
      r.overrides.push_back(v);
      return true;
    }
    return false;
  });
}

std::string gbit_text(double bits) {
  char text[32];
  std::snprintf(text, sizeof text, "%g Gbit/s", bits / 1e9);
  return text;
}

/// One table per bandwidth: a row per strategy, a column per host count,
/// each "samples/s (step ms)".
void print_projection(const json& rows) {
  std::map<double, std::map<std::string, std::map<int, const json*>>> by_bandwidth;
  std::vector<std::string> order;
  std::set<int> hosts;
  for (const auto& row : rows) {
    const std::string name = row["strategy"];
    if (std::find(order.begin(), order.end(), name) == order.end())
      order.push_back(name);
    hosts.insert(row["hosts"].get<int>());
    by_bandwidth[row["bandwidth_bits"].get<double>()][name][row["hosts"].get<int>()] = &row;
  }
  for (const auto& [bits, table] : by_bandwidth) {
    std::printf("\npredicted at %s: samples/s (step ms) per hosts\n%-26s", gbit_text(bits).c_str(),
                "strategy");
    for (int h : hosts)
      std::printf(" %17d", h);
    std::printf("\n");
    for (const auto& name : order) {
      std::printf("%-26s", name.c_str());
      for (int h : hosts) {
        const json* cell = table.at(name).at(h);
        char text[40];
        std::snprintf(text, sizeof text, "%.0f (%.1f)", (*cell)["samples_per_second"].get<double>(),
                      1e3 * (*cell)["step_seconds"].get<double>());
        std::printf(" %17s", text);
      }
      std::printf("\n");
    }
  }
}

void print_measured(const json& rows) {
  if (rows.empty())
    return;
  std::printf("\npredicted on the calibrated link (runtime: what the runtime's own costs add)\n"
              "%-26s %5s %9s %9s %9s %9s %9s %9s %12s %10s\n",
              "strategy", "hosts", "step ms", "compute", "comm", "waiting", "eval", "runtime",
              "MB/step", "samples/s");
  for (const auto& row : rows)
    std::printf("%-26s %5d %9.1f %9.1f %9.1f %9.1f %9.1f %9.2f %12.3f %10.0f\n",
                row["strategy"].get<std::string>().c_str(), row["hosts"].get<int>(),
                1e3 * row["step_seconds"].get<double>(), 1e3 * row["compute_seconds"].get<double>(),
                1e3 * row["communication_seconds"].get<double>(),
                1e3 * row["waiting_seconds"].get<double>(),
                1e3 * row["evaluation_seconds"].get<double>(),
                1e3 * row.value("runtime_seconds", 0.0),
                row["bytes_per_step"].get<double>() / 1e6,
                row["samples_per_second"].get<double>());
}

void print_predictions(const json& p) {
  const auto& link = p["link"];
  std::printf("link: %.4g Gbit/s, latency %.1f us, per-message overhead %.1f us, burst %.0f kB "
              "(%s%s)\n",
              8 * link["bandwidth"].get<double>() / 1e9, 1e6 * link["latency"].get<double>(),
              1e6 * link["message_overhead"].get<double>(), link.value("burst", 0.0) / 1e3,
              link["measured_on"].get<std::string>().c_str(),
              link.contains("cache_file") ? (", kept in " + link["cache_file"].get<std::string>()).c_str()
                                          : "");
  const auto& runtime = p["runtime"];
  std::printf("runtime: %.2f us a message at each end, %.1f us more between hosts, %.3f ms per "
              "MB, %.3f ms of CPU per MB at each end beside the actors (%s)\n",
              1e6 * runtime.value("message_seconds", 0.0),
              1e6 * runtime.value("remote_message_seconds", 0.0),
              1e9 * runtime.value("byte_seconds", 0.0),
              1e9 * runtime.value("io_byte_seconds", 0.0),
              runtime.contains("cache_file")
                ? ("kept in " + runtime["cache_file"].get<std::string>()).c_str()
                : runtime.value("method", "").c_str());
  for (const auto& m : p["profile"]["models"])
    std::printf("profile: %s stepped by %s, %d layers, profiled at %d samples, batch %d\n",
                m["model"].get<std::string>().c_str(), m["optimizer"].get<std::string>().c_str(),
                m["layers"].get<int>(), m["profiled_batch"].get<int>(), m["batch"].get<int>());
  for (const auto& s : p["skipped"])
    std::printf("not predicted: %s at %d hosts: %s\n", s["strategy"].get<std::string>().c_str(),
                s["hosts"].get<int>(), s["reason"].get<std::string>().c_str());
  print_measured(p["measured"]);
  print_projection(p["projection"]);
  std::printf("\ncrossovers:%s\n", p["crossovers"].empty() ? " none on this grid" : "");
  for (const auto& x : p["crossovers"])
    std::printf("  %s\n", x["sentence"].get<std::string>().c_str());
  std::printf("note: %s\n", p["note"].get<std::string>().c_str());
}

} // namespace

int cmd_predict(args& a, const std::atomic<bool>* interrupted) {
  command_line c;
  if (a.done() || a.items[a.next].rfind("--", 0) == 0) {
    std::fprintf(stderr, "baton predict: expected WORKLOAD.yaml first (see baton help)\n");
    return 2;
  }
  c.request.workload = a.take();
  if (!read_predict_flags(a, c))
    return 2;
  if (!not_an_input("baton predict", "--json", c.json_out,
                    {{"the workload", c.request.workload}, {"--profile", c.request.profile}}))
    return 2;
  c.request.progress = [](const std::string& what) {
    std::fprintf(stderr, "baton predict: %s\n", what.c_str());
  };
  auto p = predict(c.request, interrupted);
  if (!p)
    return fail(p.error());
  print_predictions(*p);
  if (!c.json_out.empty()) {
    if (auto why = model::try_replace_file(c.json_out, p->dump(2) + "\n"); !why.empty()) {
      std::fprintf(stderr, "baton predict: --json: %s\n", why.c_str());
      return 2;
    }
    std::printf("predictions written to %s\n", c.json_out.c_str());
  }
  return 0;
}

} // namespace baton::apps
