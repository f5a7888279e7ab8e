#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/registry.hpp"
#include "actors/modes/pretraining.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "actors/runtime/local_run.hpp"
#include "apps/bench/bench.hpp"
#include "apps/bench/step_split.hpp"
#include "apps/compare/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/error.hpp"
#include "model/core/layer_listing.hpp"
#include "model/core/specs.hpp"

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
  if (r.steady && r.steady->seconds > 0 && r.steady->samples > 0)
    return static_cast<double>(r.steady->samples) / r.steady->seconds;
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

caf::expected<void> run_process(const std::vector<std::string>& argv, const std::string& log,
                                const std::atomic<bool>* interrupted, const while_running& tick,
                                const std::string& what) {
  if (stop_requested(interrupted))
    return make_error(errc::interrupted, "interrupted");
  auto child = child_process::start(argv, log);
  if (!child)
    return child.error();
  while (child->running()) {
    if (stop_requested(interrupted))
      return make_error(errc::interrupted, "interrupted");
    if (tick)
      tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (auto code = child->wait(); code != 0)
    return make_error(errc::actor_failed, "`" + (what.empty() ? argv.at(0) : what) +
                                            "` failed (exit code " + std::to_string(code) +
                                            "); its log:\n" + child->log_tail());
  return {};
}

caf::expected<void> run_command(std::vector<std::string> args, const std::string& log,
                                const std::atomic<bool>* interrupted, const while_running& tick) {
  auto what = "baton " + args.at(0);
  args.insert(args.begin(), self_executable());
  return run_process(args, log, interrupted, tick, what);
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

const side_run& median_run(std::vector<side_run>& runs) {
  std::sort(runs.begin(), runs.end(), [](const side_run& a, const side_run& b) {
    return samples_per_second(a.result) < samples_per_second(b.result);
  });
  return runs[runs.size() / 2];
}

double of_limit(double rate, double limit) {
  return limit > 0 ? rate / limit : 0;
}

std::vector<round_rate> rates_by_round(const std::vector<side_run>& runs) {
  std::vector<round_rate> out;
  for (const auto& run : runs)
    out.push_back({run.round, samples_per_second(run.result)});
  return out;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / (1 << 20));
  return buf;
}

std::string ratio_cell(double ratio, int width, const char* suffix) {
  char buf[32];
  if (ratio > 0)
    std::snprintf(buf, sizeof buf, "%*.2f%s", width - static_cast<int>(std::strlen(suffix)),
                  ratio, suffix);
  else
    std::snprintf(buf, sizeof buf, "%*s", width, "-");
  return buf;
}

// -- the PyTorch peers ------------------------------------------------------------

const std::string& peer_python(const std::string& dir) {
  static const std::string python = [&dir] {
    std::vector<std::string> candidates;
    if (const char* chosen = std::getenv("BATON_PEER_PYTHON"); chosen && *chosen)
      candidates.emplace_back(chosen);
    candidates.insert(candidates.end(), {"/usr/bin/python3", "/usr/local/bin/python3"});
    for (const auto& candidate : candidates)
      if (::access(candidate.c_str(), X_OK) == 0 &&
          run_process({candidate, "-c", "import torch"}, dir + "/python-with-torch.log",
                      nullptr))
        return candidate;
    return std::string{};
  }();
  return python;
}

double peer_run::samples_per_second() const {
  return ran() ? figures.value("samples_per_second", 0.0) : 0.0;
}

double peer_run::seconds() const {
  return ran() ? figures.value("seconds", 0.0) : 0.0;
}

nlohmann::json peer_run::to_json(const std::string& label) const {
  nlohmann::json j = {{"label", label}, {"command", command}, {"steal_fraction", steal}};
  if (!ran())
    j["skipped"] = skipped;
  else
    j.update(figures);
  return j;
}

namespace {

/// The last line of `path` that parses as a JSON object ({} when none).
nlohmann::json last_json_line(const std::string& path) {
  std::ifstream in{path};
  nlohmann::json last = nlohmann::json::object();
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() == '{')
      if (auto j = nlohmann::json::parse(line, nullptr, false); j.is_object())
        last = std::move(j);
  return last;
}

/// The first line of `text` (a failed peer's reason, shortened for a table cell).
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

/// The last line of `path` that is not empty (a failed peer's own error).
std::string last_line(const std::string& path) {
  std::ifstream in{path};
  std::string last;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      last = line;
  return last;
}

} // namespace

peer_run run_peer(const std::string& script, const std::vector<std::string>& args,
                  const std::string& dir, const std::string& label,
                  const std::atomic<bool>* interrupted) {
  peer_run run;
  auto path = std::string{BATON_SOURCE_DIR} + "/tests/peers/" + script;
  const auto& python = peer_python(dir);
  std::vector<std::string> argv{"/usr/bin/env", std::string{"GLIBC_TUNABLES="} + peer_glibc_tunables,
                                python.empty() ? "python3" : python, path};
  argv.insert(argv.end(), args.begin(), args.end());
  for (size_t i = 1; i < argv.size(); ++i)
    run.command += (i > 1 ? " " : "") + shell_word(argv[i]);
  if (python.empty()) {
    run.skipped = "skipped: no python3 with torch";
    return run;
  }
  if (::access(path.c_str(), R_OK) != 0) {
    run.skipped = "skipped: " + path + " not found";
    return run;
  }
  auto log = dir + "/" + label + ".log";
  steal_meter steal;
  auto done = run_process(argv, log, interrupted, {}, script);
  run.steal = steal.fraction();
  if (!done) {
    run.skipped = done.error() == errc::interrupted
                    ? "interrupted"
                    : "failed: " + first_line(describe(done.error())) + ": " +
                        last_line(log) + " (log: " + log + ")";
    return run;
  }
  run.figures = last_json_line(log);
  if (run.samples_per_second() <= 0 && run.seconds() <= 0)
    run.skipped = "failed: " + script + " printed no figures (log: " + log + ")";
  return run;
}

const char* peers_legend() {
  return "limit: W x the one-thread side's samples/s at the same per-thread batch, measured in "
         "this run (W = 2\nstages or workers: every core computing all the time); of limit: "
         "samples/s over the limit;\nvs PT 2t: samples/s over the PyTorch 2-thread peer's; "
         "PyTorch N thread(s): tests/peers/train_peer.py,\nthe same model, data, batch and SGD "
         "in one plain process with torch.set_num_threads(N), timed over\nits steps after a "
         "warm-up; DDP gloo Wx1: tests/peers/ddp_peer.py, W processes of one thread, the same\n"
         "per-worker batch; PyTorch Wx1 apart: W one-thread train_peer.py processes side by "
         "side, sharing\nnothing, started together and timed over one window, their samples/s "
         "summed: the host's own\nceiling (the limit less what the cores share: caches, memory, "
         "clock); every peer runs with\nGLIBC_TUNABLES=glibc.malloc.mmap_max=0:"
         "glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1073741824:\n"
         "glibc.malloc.hugetlb=1 "
         "(the strongest peer); --json has their\ncommand lines.";
}

const peer_run& median_peer(std::vector<peer_run>& runs) {
  std::vector<peer_run*> ran;
  for (auto& r : runs)
    if (r.ran())
      ran.push_back(&r);
  if (ran.empty())
    return runs.front();
  std::sort(ran.begin(), ran.end(), [](const peer_run* a, const peer_run* b) {
    return a->samples_per_second() < b->samples_per_second();
  });
  return *ran[ran.size() / 2];
}

std::vector<round_rate> rates_by_round(const std::vector<peer_run>& runs) {
  std::vector<round_rate> out;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].ran())
      out.push_back({static_cast<int32_t>(i) + 1, runs[i].samples_per_second()});
  return out;
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

/// A layout of the shared side fitted to this host's cores, beside the
/// file's: its label in the tables and its key in --json.
struct core_layout {
  std::string label; ///< "shared, auto split"
  std::string key;   ///< "auto_split": auto_split_train_seconds, ...
  std::string tag;   ///< "auto": the row <backbone>/auto
  std::vector<std::string> overrides;
  std::vector<std::string> flags; ///< the shared side's (its node processes, its link)
  std::string explained;          ///< its lines of the footnote
};

/// The shared side's layouts for this host, what a user fitting the
/// backbone to the cores would run: `split: auto` over one stage per core
/// (at most one per layer), and one copy of the whole backbone per core
/// (`backbone.replicas`); over node processes (`flags`: the shared side's
/// --local-nodes N and --link) one copy per node. None when the user's --set
/// names the split or the copies, or for a backbone that is not built in;
/// no copies with the user's feature cache (one copy keeps it).
std::vector<core_layout> layouts_for_the_cores(const bench_request& r,
                                               const std::string& backbone,
                                               const std::vector<std::string>& o,
                                               const std::vector<std::string>& flags) {
  auto sets = [&](const char* key) {
    return std::any_of(r.overrides.begin(), r.overrides.end(),
                       [&](const std::string& v) { return v.rfind(key, 0) == 0; });
  };
  if (sets("backbone.split=") || sets("backbone.stages=") || sets("backbone.replicas="))
    return {};
  auto copies = [&](int32_t n) {
    auto with_copies = o;
    with_copies.insert(with_copies.end(),
                       {"backbone.split=[]", "backbone.replicas=" + std::to_string(n)});
    return core_layout{"shared, replicas", "replicas", "replicas", std::move(with_copies), flags,
                       "shared, replicas (the row <backbone>/replicas): the shared side with one "
                       "copy of the whole\nbackbone per core (backbone.split: [], "
                       "backbone.replicas: the cores; with --local-nodes N,\none per node), "
                       "taking the microbatches in turns;\n"};
  };
  if (r.local_nodes > 0) {
    if (r.local_nodes < 2 || sets("backbone.cache="))
      return {};
    return {copies(r.local_nodes)}; // the copies spread over the nodes, one each
  }
  model::model_spec spec;
  spec.name = backbone;
  size_t layers = 0;
  try {
    layers = model::list_layers(spec).names.size();
  } catch (const model::error&) {
    return {}; // the shared side's own run says what is wrong
  }
  const auto cores = static_cast<size_t>(actors::cores());
  std::vector<core_layout> out;
  auto split = o;
  split.insert(split.end(), {"backbone.split=auto",
                             "backbone.stages=" + std::to_string(std::min(cores, layers))});
  out.push_back({"shared, auto split", "auto_split", "auto", std::move(split), {},
                 "shared, auto split (the row <backbone>/auto above): the shared side with "
                 "backbone.split: auto and\nbackbone.stages: the cores (one stage per core, where "
                 "the file's split may have more);\n"});
  if (!sets("backbone.cache="))
    out.push_back(copies(static_cast<int32_t>(cores)));
  return out;
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
  std::printf("%-21s %9.1f %9.1f %7.2fx %9.0f %9.0f %7.2fx %10.1f  %s\n", backbone.c_str(),
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

/// A side's training time: setup excluded, evaluation included (its wall
/// time when it reports none).
double train_seconds_of(const job_result& r) {
  return r.train_seconds > 0 ? r.train_seconds : r.wall_seconds;
}

/// transfer_peer.py's arguments: the bench's heads, data and backbone.
std::vector<std::string> transfer_peer_args(const bench_request& r, const std::string& backbone,
                                            int32_t threads) {
  std::vector<std::string> a{"--heads", std::to_string(r.heads), "--threads",
                             std::to_string(threads), "--train-limit", r.quick ? "4096" : "0",
                             "--test-limit", r.quick ? "1000" : "0"};
  if (backbone == "convnet_wide")
    a.insert(a.end(), {"--wide-features", std::to_string(model::model_spec{}.wide_features)});
  return a;
}

/// One backbone's limit and PyTorch figures: (a) baton's one-thread loop,
/// the PyTorch peers with 1 and 2 threads.
struct transfer_references {
  std::optional<side_run> one_thread;
  std::vector<std::pair<std::string, peer_run>> peers; ///< by label
  double limit_seconds = 0; ///< (a)'s time over the cores (0: unknown)
  double peer_seconds = 0;  ///< the 2-thread peer's (0: did not run)
};

/// Runs (a) and the peers of `backbone`; nullopt when stopped.
std::optional<transfer_references> run_transfer_references(const bench_request& r,
                                                           const std::string& backbone,
                                                           const std::string& dir, int& code) {
  transfer_references ref;
  int width = 13;
  ref.one_thread = run_row("", side_overrides(r, backbone), {"--mode", "local", "--threads", "1"},
                           dir, backbone + "-local", r.interrupted, backbone + " (a) local",
                           width, code);
  if (stop_requested(r.interrupted))
    return std::nullopt;
  const auto cores = actors::cores();
  if (ref.one_thread)
    ref.limit_seconds = train_seconds_of(ref.one_thread->result) / cores;
  for (int32_t threads : {1, 2}) {
    auto label = threads == 1 ? std::string{"PyTorch 1 thread"} : "PyTorch 2 threads";
    auto run = run_peer("transfer_peer.py", transfer_peer_args(r, backbone, threads), dir,
                        backbone + "-pytorch-" + std::to_string(threads), r.interrupted);
    if (stop_requested(r.interrupted))
      return std::nullopt;
    if (threads == 2)
      ref.peer_seconds = run.seconds();
    ref.peers.emplace_back(label, std::move(run));
  }
  return ref;
}

/// One backbone's finished sides.
struct transfer_sides {
  std::string backbone;
  job_result shared;
  job_result separate;
  /// The shared side in the layouts for the cores, each with its run.
  std::vector<std::pair<core_layout, job_result>> fitted;
  transfer_references references;
};

/// `limit` seconds over `seconds` ("of limit" of a time), 0 when unknown.
double of_limit_time(double seconds, double limit) {
  return seconds > 0 && limit > 0 ? limit / seconds : 0;
}

/// Prints one row of the limit table: its training time, of limit, the
/// ratio of its time to the 2-thread peer's.
void print_limit_row(const std::string& backbone, const std::string& label, double seconds,
                     const transfer_references& ref) {
  std::printf("%-13s %-18s %9.2f %8s %9s\n", backbone.c_str(), label.c_str(), seconds,
              ratio_cell(of_limit_time(seconds, ref.limit_seconds), 8).c_str(),
              ratio_cell(of_limit(seconds, ref.peer_seconds), 9, "x").c_str());
}

/// Prints one backbone's limit table and adds its figures to `row`.
void report_limit(const transfer_sides& sides, nlohmann::json& row) {
  const auto& backbone = sides.backbone;
  const auto& shared = sides.shared;
  const auto& separate = sides.separate;
  const auto& ref = sides.references;
  const auto cores = actors::cores();
  std::printf("%-13s %-18s %9s %8s %9s\n", backbone.c_str(), "side", "train s", "of limit",
              "/ PT 2t");
  if (ref.one_thread)
    print_limit_row("", "(a) local 1 thread", train_seconds_of(ref.one_thread->result), ref);
  print_limit_row("", "limit = (a) / " + std::to_string(cores), ref.limit_seconds, ref);
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& [label, run] : ref.peers) {
    if (run.ran())
      print_limit_row("", label, run.seconds(), ref);
    else
      std::printf("%-13s %-18s %s\n", "", label.c_str(), run.skipped.c_str());
    auto j = run.to_json(label);
    j["of_limit"] = of_limit_time(run.seconds(), ref.limit_seconds);
    peers.push_back(std::move(j));
  }
  print_limit_row("", "shared", train_seconds_of(shared), ref);
  for (const auto& [layout, run] : sides.fitted)
    print_limit_row("", layout.label, train_seconds_of(run), ref);
  print_limit_row("", "separate", train_seconds_of(separate), ref);
  const auto shared_split = split_of_transfer(shared, cores);
  std::printf("%-13s where the cores' time went:\n%-13s %-18s %s\n", "", "", "shared",
              shared_split.text().c_str());
  for (const auto& [layout, run] : sides.fitted) {
    const auto split = split_of_transfer(run, cores);
    std::printf("%-13s %-18s %s\n", "", layout.label.c_str(), split.text().c_str());
    const auto seconds = train_seconds_of(run);
    row.update({{layout.key + "_train_seconds", seconds},
                {layout.key + "_of_limit", of_limit_time(seconds, ref.limit_seconds)},
                {layout.key + "_over_pytorch_2_threads", of_limit(seconds, ref.peer_seconds)},
                {layout.key + "_cores", split.to_json()}});
  }
  std::fflush(stdout);
  row.update({{"one_thread_train_seconds",
               ref.one_thread ? train_seconds_of(ref.one_thread->result) : 0.0},
              {"limit_train_seconds", ref.limit_seconds},
              {"shared_train_seconds", train_seconds_of(shared)},
              {"separate_train_seconds", train_seconds_of(separate)},
              {"shared_of_limit", of_limit_time(train_seconds_of(shared), ref.limit_seconds)},
              {"separate_of_limit", of_limit_time(train_seconds_of(separate), ref.limit_seconds)},
              {"pytorch_2_threads_seconds", ref.peer_seconds},
              {"shared_over_pytorch_2_threads", of_limit(train_seconds_of(shared), ref.peer_seconds)},
              {"shared_cores", shared_split.to_json()},
              {"peers", peers}});
}

/// What the layouts for the cores that ran are, for the footnote: each
/// layout's lines once, in the order they first ran.
std::string layouts_footnote(const std::vector<transfer_sides>& done) {
  std::string text;
  for (const auto& d : done)
    for (const auto& [layout, run] : d.fitted)
      if (text.find(layout.explained) == std::string::npos)
        text += layout.explained;
  return text;
}

} // namespace

int bench_transfer(const bench_request& r) {
  auto dir = bench_directory("baton-bench"); // a failed side's log tail is in its error
  if (!dir)
    return 1;
  // Pre-training is not part of either side: do it first if needed.
  run_request base;
  base.overrides = side_overrides(r, "convnet");
  auto t = load_request_topology(base);
  if (!t) {
    spdlog::error("{}", describe(t.error()));
    return 2;
  }
  if (auto ready = ensure_pretrained(*t); !ready)
    return fail(ready.error());
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
  std::printf("%-21s %9s %9s %8s %9s %9s %8s %10s  %s\n", "backbone", "shared s", "separate s",
              "time", "shared MiB", "sep. MiB", "memory", "edge MiB", "same weights");
  bench_figures out{r.json_out,
                    {{"bench", "transfer"}, {"heads", r.heads}, {"quick", r.quick},
                     {"local_nodes", r.local_nodes}, {"link", r.link},
                     {"cores", std::thread::hardware_concurrency()}}};
  int code = 0;
  std::vector<transfer_sides> done;
  for (const auto& backbone : r.backbones) {
    if (stop_requested(r.interrupted))
      break;
    auto overrides = side_overrides(r, backbone);
    std::vector<std::string> shared_flags;
    if (r.local_nodes > 0)
      shared_flags = with_link({"--local-nodes", std::to_string(r.local_nodes)}, r.link);
    auto ref = run_transfer_references(r, backbone, dir->path(), code);
    if (!ref)
      break;
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
    std::vector<std::pair<core_layout, job_result>> fitted;
    for (auto& layout : layouts_for_the_cores(r, backbone, overrides, shared_flags)) {
      auto run = run_side("", layout.overrides, layout.flags, dir->path(), backbone + "-shared-" +
                          layout.tag, r.interrupted);
      if (stop_requested(r.interrupted))
        break;
      if (!run) {
        spdlog::error("{}, {}: {}", backbone, layout.label, describe(run.error()));
        code = 1;
      } else {
        fitted.emplace_back(std::move(layout), std::move(*run));
      }
    }
    if (stop_requested(r.interrupted))
      break;
    auto row = compare(backbone, *shared, *separate);
    for (const auto& [layout, run] : fitted)
      row[layout.key] = compare(backbone + "/" + layout.tag, run, *separate);
    out.add(std::move(row));
    done.push_back({backbone, std::move(*shared), std::move(*separate), std::move(fitted),
                    std::move(*ref)});
  }
  // The limit tables after the table above, each backbone's row completed.
  for (size_t i = 0; i < done.size() && !stop_requested(r.interrupted); ++i) {
    std::printf("\n");
    report_limit(done[i], out.json()["results"][i]);
  }
  if (!stop_requested(r.interrupted))
    std::printf("\ntrain s: training time (setup excluded, evaluation included); (a) local: "
                "baton's one-process loop\n(--mode local) with one thread; limit: (a)'s time "
                "over the cores; of limit: the limit over the\nside's time; / PT 2t: the "
                "side's time over the PyTorch 2-thread peer's (below 1: baton is faster);\n"
                "where the cores' time went: the CPU of the side's processes while training over "
                "the cores x its\ntraining time (idle: no actor had work for a core, the "
                "backbone and heads waiting for each other\nor the source), of it ser/copies and "
                "wire as under `baton bench pipeline` (0.0%% in one process);\nbusy: each "
                "backbone stage's and head's computing time over the training time (a stage or\n"
                "head computes with up to the cores' threads);\n"
                "%s"
                "PyTorch N thread(s): tests/peers/transfer_peer.py, the same heads on the same "
                "frozen backbone\nby hand in one process with torch.set_num_threads(N), run with "
                "GLIBC_TUNABLES=%s\n(the strongest peer); --json has their command lines.\n",
                layouts_footnote(done).c_str(), peer_glibc_tunables);
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
      return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
    if (flag == "--backbone")
      return a.value(flag, v) && (v == "convnet" || v == "convnet_wide") && (r.backbones = {v}, true);
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
