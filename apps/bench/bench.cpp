#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/registry.hpp"
#include "actors/modes/pretraining.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "apps/compare/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::apps {
inline namespace bench {

bool stop_requested(const std::atomic<bool>* interrupted) {
  return interrupted != nullptr && interrupted->load();
}

namespace {

/// Every run run_side finished in this process, as run records: a bench's
/// --json lists them under "runs" (the schema of baton compare, which
/// `baton report` reads), beside its own rows.
nlohmann::json& finished_runs() {
  static nlohmann::json runs = nlohmann::json::array();
  return runs;
}

} // namespace

bench_figures::bench_figures(std::string path, nlohmann::json header, std::string rows)
    : path_(std::move(path)), figures_(std::move(header)), rows_(std::move(rows)) {
  if (!figures_.contains(rows_))
    figures_[rows_] = nlohmann::json::array();
  finished_runs() = nlohmann::json::array();
}

namespace {

/// Writes `text` to `path` whole (model::try_replace_file: a new temporary
/// file renamed over it, never through a symbolic link), so that a reader
/// (or a second signal) never finds half a file; "" or the reason.
std::string write_whole(const std::string& path, const std::string& text) {
  return model::try_replace_file(path, text);
}

} // namespace

int bench_figures::finish(int code, const std::atomic<bool>* interrupted) {
  bool stopped = stop_requested(interrupted);
  if (stopped)
    code = interrupted_exit_code;
  if (path_.empty()) {
    if (stopped)
      std::printf("interrupted\n");
    return code;
  }
  if (stopped && rows() == 0) {
    std::printf("interrupted before any row finished: %s left as it was\n", path_.c_str());
    return code;
  }
  if (stopped)
    figures_["interrupted"] = true;
  figures_["runs"] = finished_runs();
  if (auto why = write_whole(path_, figures_.dump(2) + "\n"); !why.empty()) {
    spdlog::error("{}", why);
    return stopped ? code : 1;
  }
  if (stopped)
    std::printf("interrupted: the %zu finished row(s) written to %s\n", rows(), path_.c_str());
  else
    std::printf("figures written to %s\n", path_.c_str());
  return code;
}

std::optional<owned_directory> bench_directory(const std::string& prefix) {
  auto dir = make_work_directory(prefix);
  if (!dir) {
    spdlog::error("{}", describe(dir.error()));
    return std::nullopt;
  }
  return std::optional<owned_directory>{std::in_place, *dir};
}

std::vector<std::string> with_link(std::vector<std::string> flags, const std::string& link) {
  if (!link.empty())
    flags.insert(flags.end(), {"--link", link});
  return flags;
}

double samples_per_second(const job_result& r) {
  int64_t samples = r.heads.empty() ? 0 : r.heads.front().samples;
  double seconds = r.train_seconds > 0 ? r.train_seconds : r.wall_seconds;
  return seconds > 0 ? samples / seconds : 0;
}

double steal_meter::fraction() const {
  auto now = read();
  auto total = now.total - start_.total;
  return total > 0 ? static_cast<double>(now.steal - start_.steal) / total : 0;
}

steal_meter::sample steal_meter::read() {
  std::ifstream in{"/proc/stat"};
  std::string cpu;
  in >> cpu;
  sample s;
  for (int i = 0; i < 10 && in; ++i) {
    int64_t v = 0;
    in >> v;
    s.total += v;
    if (i == 7)
      s.steal = v;
  }
  return s;
}

caf::expected<void> run_command(std::vector<std::string> args, const std::string& log,
                                const std::atomic<bool>* interrupted, const while_running& tick) {
  args.insert(args.begin(), self_executable());
  auto child = child_process::start(args, log);
  if (!child)
    return child.error();
  while (child->running()) {
    if (interrupted && interrupted->load())
      return make_error(errc::interrupted, "interrupted");
    if (tick)
      tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (auto code = child->wait(); code != 0)
    return make_error(errc::actor_failed, "`baton " + args.at(1) + "` failed (exit code " +
                                            std::to_string(code) + "); its log:\n" +
                                            child->log_tail());
  return {};
}

namespace {

std::vector<std::string> side_args(const std::string& topology,
                                   const std::vector<std::string>& overrides,
                                   const std::vector<std::string>& flags, const std::string& dir,
                                   const std::string& label) {
  std::vector<std::string> args{"run"};
  if (!topology.empty())
    args.push_back(topology);
  for (const auto& o : overrides)
    args.insert(args.end(), {"--set", o});
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--metrics-out", dir + "/" + label + ".json"});
  return args;
}

/// `text` as one shell word.
std::string shell_word(const std::string& text) {
  if (text.find_first_of(" '\"$`\\[]{}*?;&|<>()!#~") == std::string::npos && !text.empty())
    return text;
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return quoted + "'";
}

} // namespace

std::string side_command(const std::string& topology, const std::vector<std::string>& overrides,
                         const std::vector<std::string>& flags, const std::string& dir,
                         const std::string& label) {
  std::string line = "baton";
  for (const auto& word : side_args(topology, overrides, flags, dir, label))
    line += " " + shell_word(word);
  return line;
}

caf::expected<job_result> run_side(const std::string& topology,
                                   const std::vector<std::string>& overrides,
                                   std::vector<std::string> flags, const std::string& dir,
                                   const std::string& label, const std::atomic<bool>* interrupted,
                                   const while_running& tick) {
  auto out = dir + "/" + label + ".json";
  auto args = side_args(topology, overrides, flags, dir, label);
  if (auto done = run_command(std::move(args), dir + "/" + label + ".log", interrupted, tick);
      !done)
    return done.error();
  std::ifstream in{out};
  auto metrics = nlohmann::json::parse(in, nullptr, false);
  if (metrics.is_object())
    finished_runs().push_back(run_record(label, metrics.value("mode", metrics.value("job", "")),
                                         side_command(topology, overrides, flags, dir, label),
                                         metrics, std::nullopt));
  return job_result_from_json(metrics);
}

std::optional<side_run> run_row(const std::string& topology,
                                const std::vector<std::string>& overrides,
                                std::vector<std::string> flags, const std::string& dir,
                                const std::string& name, const std::atomic<bool>* interrupted,
                                const std::string& row, int width, int& code) {
  steal_meter steal;
  auto result = run_side(topology, overrides, std::move(flags), dir, name, interrupted);
  if (result)
    return side_run{std::move(*result), steal.fraction()};
  if (!stop_requested(interrupted)) {
    std::printf("%-*s failed: %s\n", width, row.c_str(), describe(result.error()).c_str());
    code = 1;
  }
  return std::nullopt;
}

namespace {

/// `heads` heads cycling over the default tasks.
std::string heads_override(int32_t heads) {
  static const char* tasks[] = {"all10", "footwear", "groups4"};
  std::string list = "heads=[";
  for (int32_t i = 0; i < heads; ++i) {
    auto task = tasks[i % 3];
    auto name = heads <= 3 ? std::string{task} : task + std::string{"_"} + std::to_string(i);
    list += (i ? ", " : "") + std::string{"{name: "} + name + ", task: " + task + "}";
  }
  return list + "]";
}

std::vector<std::string> side_overrides(const bench_request& r, const std::string& backbone) {
  std::vector<std::string> o{heads_override(r.heads), "backbone.model=" + backbone};
  if (backbone == "convnet_wide") {
    // No pretrained wide backbone: frozen initial weights (the timing and the
    // memory do not depend on them). Its fc1 (1152x32768, 75 MFLOP/sample)
    // gets a stage of its own instead of sharing one with conv5 and fc1b.
    o.insert(o.end(), {"backbone.checkpoint=none", "backbone.split=[pool2, relu6]"});
  }
  if (r.quick)
    o.insert(o.end(), {"data.train_limit=4096", "data.test_limit=1000"});
  o.insert(o.end(), r.overrides.begin(), r.overrides.end());
  return o;
}

bool same_weights(const job_result& a, const job_result& b) {
  if (a.heads.size() != b.heads.size())
    return false;
  for (size_t i = 0; i < a.heads.size(); ++i)
    if (a.heads[i].weights_digest != b.heads[i].weights_digest)
      return false;
  return true;
}

/// `bytes` in MiB, for a number column.
double in_mib(int64_t bytes) {
  return bytes / 1048576.0;
}

nlohmann::json compare(const std::string& backbone, const job_result& shared,
                       const job_result& separate) {
  auto shared_mem = total_peak_rss(shared);
  auto separate_mem = total_peak_rss(separate);
  std::printf("%-13s %9.1f %9.1f %7.2fx %9.0f %9.0f %7.2fx %10.1f  %s\n", backbone.c_str(),
              shared.wall_seconds, separate.wall_seconds,
              shared.wall_seconds / separate.wall_seconds, in_mib(shared_mem), in_mib(separate_mem),
              static_cast<double>(shared_mem) / separate_mem, in_mib(total_edge_bytes(shared)),
              same_weights(shared, separate) ? "yes" : "NO");
  std::fflush(stdout);
  return {{"backbone", backbone},
          {"shared_wall_seconds", shared.wall_seconds},
          {"separate_wall_seconds", separate.wall_seconds},
          {"time_ratio", shared.wall_seconds / separate.wall_seconds},
          {"shared_peak_rss_bytes", shared_mem},
          {"separate_peak_rss_bytes", separate_mem},
          {"memory_ratio", static_cast<double>(shared_mem) / separate_mem},
          {"bytes_between_actors", total_edge_bytes(shared)},
          {"identical_head_weights", same_weights(shared, separate)}};
}

} // namespace

int bench_transfer(const bench_request& r) {
  auto dir = bench_directory("baton-bench"); // a failed side's log tail is in its error
  if (!dir)
    return 1;
  // Pre-training is not part of either side: do it first if needed.
  run_request base;
  base.overrides = side_overrides(r, "convnet");
  if (auto t = load_request_topology(base); !t || !ensure_pretrained(*t)) {
    spdlog::error("cannot prepare the pretrained backbone");
    return 1;
  }
  if (stop_requested(r.interrupted))
    return interrupted_exit_code;
  auto where = r.local_nodes > 0 ? "actors on " + std::to_string(r.local_nodes) +
                                     " local node processes (edge bytes cross sockets)"
                                 : std::string{"actors in one process"};
  std::printf("baton bench transfer: %d heads, %s, %u cores\n  shared = one backbone, %d heads, "
              "%s\n  separate = %d processes, each with its own backbone and one head\n",
              r.heads, r.quick ? "quick (4096 train / 1000 test samples, 1 epoch)"
                               : "full data (60000 train / 10000 test, 1 epoch)",
              std::thread::hardware_concurrency(), r.heads, where.c_str(), r.heads);
  std::printf("%-13s %9s %9s %8s %9s %9s %8s %10s  %s\n", "backbone", "shared s", "separate s",
              "time", "shared MiB", "sep. MiB", "memory", "edge MiB", "same weights");
  bench_figures out{r.json_out,
                    {{"bench", "transfer"}, {"heads", r.heads}, {"quick", r.quick},
                     {"local_nodes", r.local_nodes}, {"link", r.link},
                     {"cores", std::thread::hardware_concurrency()}}};
  int code = 0;
  for (const auto& backbone : r.backbones) {
    if (stop_requested(r.interrupted))
      break;
    auto overrides = side_overrides(r, backbone);
    std::vector<std::string> shared_flags;
    if (r.local_nodes > 0)
      shared_flags = with_link({"--local-nodes", std::to_string(r.local_nodes)}, r.link);
    auto shared =
      run_side("", overrides, shared_flags, dir->path(), backbone + "-shared", r.interrupted);
    auto separate = shared ? run_side("", overrides, {"--baseline", "separate"}, dir->path(),
                                      backbone + "-separate", r.interrupted)
                           : caf::expected<job_result>{shared.error()};
    if (!shared || !separate) {
      if (stop_requested(r.interrupted))
        break;
      spdlog::error("{}: {}", backbone, describe(!shared ? shared.error() : separate.error()));
      code = 1;
      continue;
    }
    out.add(compare(backbone, *shared, *separate));
  }
  return out.finish(code, r.interrupted);
}

int bench_transfer_command(args& a, const std::atomic<bool>* interrupted) {
  bench_request r;
  r.interrupted = interrupted;
  std::string v;
  bool read = read_flags(a, "baton bench transfer", [&](const std::string& flag) {
    if (flag == "--heads")
      return a.value(flag, v) && parse_int(flag, v, r.heads) && r.heads > 0;
    if (flag == "--quick")
      return r.quick = true;
    if (flag == "--local-nodes")
      return a.value(flag, v) && parse_int(flag, v, r.local_nodes);
    if (flag == "--json")
      return a.value(flag, r.json_out);
    if (flag == "--backbone")
      return a.value(flag, v) && (r.backbones = {v}, true);
    if (flag == "--set")
      return a.value(flag, v) && (r.overrides.push_back(v), true);
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    return false;
  });
  if (read && !r.link.empty() && r.local_nodes < 1) {
    std::fprintf(stderr, "baton bench transfer: --link needs --local-nodes N (the shared side's "
                         "node processes are what it shapes)\n");
    return 2;
  }
  return read ? bench_transfer(r) : 2;
}

const std::vector<bench_command>& all_benches() {
  static const std::vector<bench_command> benches{
    {"transfer", bench_transfer_command},   {"pipeline", bench_pipeline_command},
    {"data-parallel", bench_data_parallel_command}, {"freezing", bench_freezing_command},
    {"ist", bench_ist_command},             {"faults", bench_faults_command},
  };
  return benches;
}

} // namespace bench
} // namespace baton::apps
