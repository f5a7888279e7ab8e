// `baton bench freezing`: the fine-tuning experiment of the layer-freezing
// study. A convnet pretrained on one task (groups4) is fine-tuned on another
// (all10) by W = 2 data-parallel workers on 2 node processes: fully, with
// the prefix frozen after each convnet group, adaptively (AutoFreeze), and
// with the frozen prefix's features cached.

#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "messages/errc.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// One row: its label and the freezing it sets.
struct freezing_side {
  std::string name;
  std::string label;
  std::vector<std::string> overrides;
};

std::vector<freezing_side> freezing_sides() {
  auto fixed = [](const std::string& layer, bool cache) {
    return std::vector<std::string>{"data_parallel.freeze.policy=fixed",
                                     "data_parallel.freeze.up_to=" + layer,
                                     std::string{"data_parallel.freeze.cache="} +
                                       (cache ? "memory" : "none")};
  };
  // As configs/fine-tune.yaml: decide every 16 steps, never past pool3.
  auto adaptive = [](bool cache) {
    return std::vector<std::string>{"data_parallel.freeze.policy=adaptive",
                                     "data_parallel.freeze.interval=16",
                                     "data_parallel.freeze.max_frozen=pool3",
                                     std::string{"data_parallel.freeze.cache="} +
                                       (cache ? "memory" : "none")};
  };
  return {{"full", "full fine-tuning", {}},
          {"pool1", "frozen to pool1", fixed("pool1", false)},
          {"pool2", "frozen to pool2", fixed("pool2", false)},
          {"pool3", "frozen to pool3", fixed("pool3", false)},
          {"pool3-cache", "pool3 + cache", fixed("pool3", true)},
          {"adaptive", "adaptive", adaptive(false)},
          {"adaptive-cache", "adaptive + cache", adaptive(true)}};
}

/// The sum over workers of each named figure, per epoch and per worker.
std::map<std::string, double> seconds_per_epoch(const job_result& r, int32_t epochs) {
  std::map<std::string, double> sum;
  int32_t workers = 0;
  for (const auto& a : r.actors) {
    if (a.role != "data_parallel_worker")
      continue;
    ++workers;
    for (const auto& f : a.figures)
      sum[f.name] += f.value;
  }
  for (auto& [name, value] : sum)
    value /= std::max(1, workers) * std::max(1, epochs);
  return sum;
}

double figure(const std::map<std::string, double>& f, const char* name) {
  auto it = f.find(name);
  return it == f.end() ? 0 : it->second;
}

/// Bytes the workers sent per step (all workers).
double bytes_per_step(const job_result& r, int64_t steps) {
  double bytes = 0;
  for (const auto& a : r.actors)
    if (a.role == "data_parallel_worker")
      for (const auto& e : a.edges)
        bytes += static_cast<double>(e.bytes);
  return bytes / static_cast<double>(std::max<int64_t>(1, steps));
}

/// Where worker 0's adaptive decisions moved the freeze point (adaptive
/// rows), "layer@step, ..." (a decision that keeps the point is left out).
std::string decisions_of(const job_result& r) {
  std::string out;
  std::string frozen;
  for (const auto& a : r.actors) {
    if (a.actor != "worker.0")
      continue;
    for (const auto& e : a.events) {
      auto j = nlohmann::json::parse(e, nullptr, false);
      if (j.is_discarded() || !j.contains("layer") || j.value("layer", "") == frozen)
        continue;
      frozen = j.value("layer", "");
      out += (out.empty() ? "" : ", ") + frozen + "@" +
             std::to_string(j.value("step", int64_t{-1}));
    }
  }
  return out.empty() ? "-" : out;
}

/// Pretrains the convnet on groups4 into dir/groups4.pt. --quick's 4,096
/// samples at transfer.yaml's lr of 0.05 (momentum 0.9) left a collapsed
/// network on an Intel Xeon (50.00% on groups4, its largest group's share:
/// every row fine-tuned at chance, 10.2%); at 0.02 they reach 92.84%, and
/// 20,000 samples at 0.05 98.32% (2026-12-07).
caf::expected<std::string> pretrain(const bench_freezing_request& r, const std::string& dir) {
  auto checkpoint = dir + "/convnet-groups4.pt";
  std::vector<std::string> argv{"pretrain", std::string{BATON_SOURCE_DIR} + "/configs/transfer.yaml",
                                "--set", "backbone.checkpoint=" + checkpoint,
                                "--set", "backbone.pretrain.task=groups4",
                                "--set", std::string{"backbone.pretrain.train_limit="} +
                                           (r.quick ? "4096" : "20000"),
                                "--set", "backbone.pretrain.epochs=1"};
  if (r.quick)
    argv.insert(argv.end(), {"--set", "backbone.pretrain.optimizer.lr=0.02"});
  std::printf("pretraining the convnet on groups4 (%s samples, 1 epoch%s)...\n",
              r.quick ? "4096" : "20000", r.quick ? ", lr 0.02" : "");
  std::fflush(stdout);
  if (auto done = run_command(argv, dir + "/pretrain.log", r.interrupted); !done)
    return done.error();
  return checkpoint;
}

void print_header(const bench_freezing_request& r, int64_t samples) {
  std::printf("\nbaton bench freezing: %s, convnet pretrained on groups4, fine-tuned on all10 by "
              "W = 2 workers on 2 node processes (one compute thread each), %lld samples x %d "
              "epochs, %u cores, link %s\n\n",
              r.quick ? "quick" : "full", static_cast<long long>(samples), r.epochs,
              std::thread::hardware_concurrency(), r.link.empty() ? "loopback" : r.link.c_str());
  std::printf("%-17s %9s %8s %28s %10s %8s %8s  %s\n", "side", "samples/s", "speedup",
              "s/epoch: fwd/bwd/exch/step", "MiB/step", "test acc", "steal", "frozen at");
}

nlohmann::json report_side(const bench_freezing_request& r, const freezing_side& s,
                           const side_run& run, double full_rate, int64_t steps) {
  auto rate = samples_per_second(run.result);
  auto split = seconds_per_epoch(run.result, r.epochs);
  auto bytes = bytes_per_step(run.result, steps);
  auto accuracy = run.result.heads.front().test_accuracy;
  auto decisions = decisions_of(run.result);
  char times[64];
  std::snprintf(times, sizeof times, "%.1f/%.1f/%.1f/%.1f", figure(split, "forward_seconds"),
                figure(split, "backward_seconds"), figure(split, "exchange_wait_seconds"),
                figure(split, "step_seconds"));
  std::printf("%-17s %9.1f %7.2fx %28s %10.2f %7.1f%% %7.0f%%  %s\n", s.label.c_str(), rate,
              full_rate > 0 ? rate / full_rate : 0, times, bytes / (1 << 20), 100 * accuracy,
              100 * run.steal, decisions.c_str());
  std::fflush(stdout);
  nlohmann::json f = nlohmann::json::object();
  for (const auto& [name, value] : split)
    f[name] = value;
  return {{"side", s.name}, {"samples_per_second", rate},
          {"speedup", full_rate > 0 ? rate / full_rate : 0}, {"seconds_per_epoch", f},
          {"bytes_per_step", bytes}, {"test_accuracy", accuracy}, {"frozen_at", decisions},
          {"steal_fraction", run.steal}};
}

void print_freezing_legend() {
  std::printf(
    "\nsamples/s: training samples over training time after the warm-up (setup and the first 20 "
    "steps\nexcluded); speedup: over full "
    "fine-tuning;\ns/epoch: a worker's seconds per epoch in the forward (the frozen prefix "
    "included, or read from the\ncache), the backward, waiting for the ring and the optimizer "
    "step; MiB/step: what the workers sent\nper step (frozen layers send nothing); frozen at: "
    "the adaptive decisions (last frozen layer@step).\n");
}

} // namespace

int bench_freezing(const bench_freezing_request& r) {
  auto dir = bench_directory("baton-bench-freezing");
  if (!dir)
    return 1;
  auto checkpoint = pretrain(r, dir->path());
  if (!checkpoint) {
    if (stop_requested(r.interrupted))
      return interrupted_exit_code; // no row yet: --json FILE is left as it was
    spdlog::error("pretraining failed: {}", describe(checkpoint.error()));
    return 1;
  }
  int64_t samples = r.quick ? 4096 : 16384;
  int64_t steps = (samples / 2 + r.batch - 1) / r.batch * r.epochs;
  print_header(r, samples);
  bench_figures out{r.json_out, {{"bench", "freezing"}, {"quick", r.quick}, {"epochs", r.epochs},
                                 {"train_samples", samples}, {"link", r.link}}};
  double full_rate = 0;
  int code = 0;
  for (const auto& s : freezing_sides()) {
    if (stop_requested(r.interrupted))
      break;
    std::vector<std::string> o{"data_parallel.model=convnet", "backbone.checkpoint=" + *checkpoint,
                               "data_parallel.workers=2", "data.batch_size=" + std::to_string(r.batch),
                               "data.epochs=" + std::to_string(r.epochs),
                               "data.train_limit=" + std::to_string(samples),
                               "data.test_limit=2000", "runtime.compute_threads=1"};
    o.insert(o.end(), s.overrides.begin(), s.overrides.end());
    auto run = run_row(std::string{BATON_SOURCE_DIR} + "/configs/data-parallel.yaml", o,
                       with_link({"--local-nodes", "2"}, r.link), dir->path(), s.name,
                       r.interrupted, s.label, 17, code);
    if (!run)
      continue; // failed, or stopped: the rows of the sides before this one are written
    if (s.name == "full")
      full_rate = samples_per_second(run->result);
    out.add(report_side(r, s, *run, full_rate, steps));
  }
  if (!stop_requested(r.interrupted))
    print_freezing_legend();
  return out.finish(code, r.interrupted);
}

int bench_freezing_command(args& a, const std::atomic<bool>* interrupted) {
  bench_freezing_request r;
  r.interrupted = interrupted;
  std::string v;
  int32_t batch = 0;
  bool read = read_flags(a, "baton bench freezing", [&](const std::string& flag) {
    if (flag == "--quick")
      return r.quick = true;
    if (flag == "--json")
      return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
    if (flag == "--epochs")
      return a.value(flag, v) && parse_int(flag, v, r.epochs) && r.epochs >= 1;
    if (flag == "--batch")
      return a.value(flag, v) && parse_int(flag, v, batch) && batch >= 2 && (r.batch = batch, true);
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    return false;
  });
  return read ? bench_freezing(r) : 2;
}

} // namespace bench
} // namespace baton::apps
