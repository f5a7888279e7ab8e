// `baton bench ist`: independent subnet training against local SGD and the
// ring on the SAME network (IST's: data_parallel.model: ist_mlp), the same
// W workers on W node processes, the same link, data, batch and lr: time to
// a target test accuracy, read from each epoch's "seconds" in the metrics.

#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/topology.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/dataset.hpp"
#include "model/ist/ist.hpp"
#include "model/ist_mlp/mlp.hpp"
#include "model/core/layered_model.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// One run: which mode, its label and overrides over the common ones.
struct ist_side {
  std::string name;  ///< ist | local-sgd | ring
  std::string label; ///< "(a) IST L=8", ...
  std::string topology;
  std::vector<std::string> overrides;
};

/// "[4096, 4096]"
std::string widths_text(const std::vector<int64_t>& hidden) {
  std::string s = "[";
  for (size_t i = 0; i < hidden.size(); ++i)
    s += (i ? ", " : "") + std::to_string(hidden[i]);
  return s + "]";
}

/// The three runs for one network: (a) IST, (b) local SGD with sync_every =
/// IST's local steps, (c) the ring every step.
std::vector<ist_side> sides_of(const bench_ist_request& r, const std::vector<int64_t>& hidden) {
  const std::string dir = std::string{BATON_SOURCE_DIR} + "/configs/";
  const auto w = std::to_string(r.workers);
  const auto l = std::to_string(r.local_steps);
  const auto lr = std::to_string(r.lr);
  std::vector<std::string> dp{"data_parallel.model=ist_mlp",
                              "data_parallel.hidden=" + widths_text(hidden),
                              "data_parallel.workers=" + w, "data_parallel.optimizer.lr=" + lr,
                              "data_parallel.optimizer.momentum=0"};
  auto with = [](std::vector<std::string> o, const std::string& extra) {
    o.push_back(extra);
    return o;
  };
  return {{"ist", "(a) IST L=" + l, dir + "ist.yaml",
           {"ist.workers=" + w, "ist.shards=" + w, "ist.hidden=" + widths_text(hidden),
            "ist.local_steps=" + l, "ist.optimizer.lr=" + lr, "ist.optimizer.momentum=0"}},
          {"local-sgd", "(b) local SGD L=" + l, dir + "data-parallel.yaml",
           with(dp, "data_parallel.sync_every=" + l)},
          {"ring", "(c) ring every step", dir + "data-parallel.yaml",
           with(dp, "data_parallel.sync_every=0")}};
}

/// The overrides every run shares: data, batch, epochs, one compute thread.
std::vector<std::string> common_overrides(const bench_ist_request& r) {
  return {"data.dataset=fashion-mnist", "data.batch_size=" + std::to_string(r.batch),
          "data.epochs=" + std::to_string(r.epochs),
          "data.train_limit=" + std::to_string(r.train_limit),
          "data.test_limit=" + std::to_string(r.test_limit), "runtime.compute_threads=1",
          "runtime.stop_at_accuracy=" + std::to_string(r.target)};
}

/// One epoch of a run's curve.
struct curve_point {
  int32_t epoch = 0;    ///< from 1
  double seconds = -1; ///< into training (-1: not stamped)
  double accuracy = 0;
};

/// The first head's epochs with their seconds.
std::vector<curve_point> curve_of(const job_result& result) {
  std::vector<curve_point> out;
  if (result.heads.empty())
    return out;
  const auto& head = result.heads.front();
  auto stamps = result.epoch_seconds.find(head.actor);
  if (stamps == result.epoch_seconds.end() && !result.epoch_seconds.empty())
    stamps = result.epoch_seconds.begin();
  for (const auto& e : head.epochs) {
    curve_point p{e.epoch + 1, -1, e.test_accuracy}; // from 1, as the log and metrics
    if (stamps != result.epoch_seconds.end() && stamps->second.count(e.epoch))
      p.seconds = stamps->second.at(e.epoch);
    out.push_back(p);
  }
  return out;
}

/// The first epoch at or above `target`, or nullptr.
const curve_point* reached(const std::vector<curve_point>& curve, double target) {
  for (const auto& p : curve)
    if (p.accuracy >= target && p.seconds >= 0)
      return &p;
  return nullptr;
}

/// A figure of an actor's report (0 when it has none).
double figure_of(const messages::actor_report& a, const std::string& name) {
  for (const auto& f : a.figures)
    if (f.name == name)
      return f.value;
  return 0;
}

/// Bytes a worker sends per round of L local steps, the mean over workers:
/// its edges over the rounds it made (IST's "rounds"; a data-parallel
/// worker's "steps" over L), which a run stopped at the target counts too.
double bytes_per_round(const job_result& result, int32_t local_steps) {
  double sum = 0;
  int32_t workers = 0;
  for (const auto& a : result.actors) {
    double rounds = 0;
    if (a.role == "ist_worker")
      rounds = figure_of(a, "rounds");
    else if (a.role == "data_parallel_worker")
      rounds = figure_of(a, "steps") / local_steps;
    if (rounds <= 0)
      continue;
    double sent = 0;
    for (const auto& e : a.edges)
      sent += static_cast<double>(e.bytes);
    sum += sent / rounds;
    ++workers;
  }
  return workers > 0 ? sum / workers : 0;
}

/// What a worker sends per round in theory: IST's formula; the ring's
/// 2(W-1)/W x the parameters every step (L per round) or once (local SGD).
double theory_of(const bench_ist_request& r, const ist_side& s,
                 const std::vector<int64_t>& hidden) {
  model::ist::shape shape;
  shape.hidden = hidden;
  if (s.name == "ist")
    return model::ist::bytes_formula(shape, r.workers);
  model::model_spec spec;
  spec.name = model::ist::mlp_name;
  spec.hidden = hidden;
  const auto bytes = static_cast<double>(model::parameter_count(model::ist::make_mlp(spec)) * 4);
  const double ring = model::ring_bytes_theory(bytes, r.workers);
  return s.name == "ring" ? ring * r.local_steps : ring;
}

/// Prints one run and returns its JSON and its time to the target (-1: not
/// reached).
std::pair<nlohmann::json, double> report_run(const bench_ist_request& r, const ist_side& s,
                                             const std::vector<int64_t>& hidden,
                                             const side_run& run) {
  const auto curve = curve_of(run.result);
  const auto* hit = reached(curve, r.target);
  double best = 0;
  nlohmann::json points = nlohmann::json::array();
  std::string line;
  for (const auto& p : curve) {
    best = std::max(best, p.accuracy);
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %d: %.1fs %.2f%%", p.epoch, p.seconds, 100 * p.accuracy);
    line += buf;
    points.push_back({{"epoch", p.epoch}, {"seconds", p.seconds}, {"accuracy", p.accuracy}});
  }
  const double sent = bytes_per_round(run.result, r.local_steps);
  const double theory = theory_of(r, s, hidden);
  const double final_accuracy = curve.empty() ? 0 : curve.back().accuracy;
  char verdict[96];
  if (hit)
    std::snprintf(verdict, sizeof verdict, "reached at epoch %d after %.1f s%s", hit->epoch,
                  hit->seconds, run.result.stopped ? ", stopped" : "");
  else
    std::snprintf(verdict, sizeof verdict, "not reached: epoch limit %d (best %.2f%%)",
                  r.epochs, 100 * best);
  std::printf("%-22s %-40s final %6.2f%%  MiB/worker/round %8s (theory %8s)  train %.1fs  "
              "steal %.0f%%\n%22s%s\n",
              s.label.c_str(), verdict, 100 * final_accuracy, mib(sent).c_str(),
              mib(theory).c_str(), run.result.train_seconds, 100 * run.steal, "",
              line.c_str());
  std::fflush(stdout);
  const double seconds = hit ? hit->seconds : -1;
  return {{{"side", s.name}, {"label", s.label}, {"curve", points},
           {"seconds_to_target", seconds}, {"reached_epoch", hit ? hit->epoch : -1},
           {"stopped_at_target", run.result.stopped.has_value()},
           {"best_accuracy", best}, {"final_accuracy", final_accuracy},
           {"bytes_per_worker_round", sent}, {"theory_bytes_per_worker_round", theory},
           {"train_seconds", run.result.train_seconds}, {"steal_fraction", run.steal}},
          seconds};
}

/// "3.2x" or "n/a" (either side did not reach the target).
std::string speedup(double ist, double other) {
  if (ist <= 0 || other <= 0)
    return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", other / ist);
  return buf;
}

/// The three runs of one network; their JSON, or nullopt when interrupted.
std::optional<nlohmann::json> bench_network(const bench_ist_request& r,
                                            const std::vector<int64_t>& hidden,
                                            const std::string& dir, int& code) {
  std::printf("\n%zu-layer network, hidden %s:\n", hidden.size() + 1,
              widths_text(hidden).c_str());
  nlohmann::json runs = nlohmann::json::array();
  std::vector<double> seconds;
  const auto flags = with_link({"--local-nodes", std::to_string(r.workers)}, r.link);
  for (const auto& s : sides_of(r, hidden)) {
    auto o = common_overrides(r);
    o.insert(o.end(), s.overrides.begin(), s.overrides.end());
    auto label = s.name + "-" + std::to_string(hidden.size() + 1) + "layer";
    auto run = run_row(s.topology, o, flags, dir, label, r.interrupted, s.label, 22, code);
    if (!run && stop_requested(r.interrupted))
      return std::nullopt;
    if (!run) {
      seconds.push_back(-1);
      continue;
    }
    auto [json, to_target] = report_run(r, s, hidden, *run);
    runs.push_back(std::move(json));
    seconds.push_back(to_target);
  }
  std::printf("%22s speedup of (a) in time to %.0f%%: over (b) %s, over (c) %s\n", "",
              100 * r.target, speedup(seconds[0], seconds[1]).c_str(),
              speedup(seconds[0], seconds[2]).c_str());
  return nlohmann::json{{"hidden", hidden}, {"runs", runs},
                        {"speedup_over_local_sgd", seconds[0] > 0 && seconds[1] > 0
                                                       ? seconds[1] / seconds[0] : 0.0},
                        {"speedup_over_ring", seconds[0] > 0 && seconds[2] > 0
                                                  ? seconds[2] / seconds[0] : 0.0}};
}

void print_header(const bench_ist_request& r) {
  std::printf("baton bench ist: %s, Fashion-MNIST %lld training / %lld test samples, W = %d "
              "workers on %d node processes (%u cores), link %s\n"
              "  every run: IST's network (no biases, batch-statistics batch norm, affine-free "
              "norm on the logits),\n  %lld samples per worker per step, plain SGD lr %g, one "
              "compute thread per worker, %d epochs; target %.0f%%\n",
              r.quick ? "quick" : "full", static_cast<long long>(r.train_limit),
              static_cast<long long>(r.test_limit), r.workers, r.workers,
              std::thread::hardware_concurrency(), r.link.empty() ? "loopback" : r.link.c_str(),
              static_cast<long long>(r.batch), r.lr, r.epochs, 100 * r.target);
}

/// `r` with its limits resolved to the samples the runs read (0: the whole
/// split, counted from the headers of the configs' Fashion-MNIST files),
/// so that rounds and the header count real samples. Throws model::error
/// naming a missing or corrupt file.
bench_ist_request with_sample_counts(bench_ist_request r) {
  const std::string data_dir = topology{}.data.path; // configs/ist.yaml's and data-parallel.yaml's
  for (auto [limit, which] : {std::pair{&r.train_limit, model::split::train},
                              std::pair{&r.test_limit, model::split::test}}) {
    const int64_t all = model::fashion_mnist_size(data_dir, which);
    *limit = *limit > 0 ? std::min(*limit, all) : all;
  }
  return r;
}

} // namespace

int bench_ist(const bench_ist_request& request) {
  bench_ist_request r;
  try {
    r = with_sample_counts(request);
  } catch (const std::exception& e) {
    spdlog::error("baton bench ist: {}", e.what());
    return 1;
  }
  auto dir = bench_directory("baton-bench-ist");
  if (!dir)
    return 1;
  print_header(r);
  bench_figures out{r.json_out,
                    {{"bench", "ist"}, {"quick", r.quick}, {"workers", r.workers},
                     {"link", r.link}, {"target", r.target}, {"epochs", r.epochs},
                     {"batch", r.batch}, {"lr", r.lr}, {"local_steps", r.local_steps},
                     {"train_samples", r.train_limit}, {"test_samples", r.test_limit}},
                    "networks"};
  int code = 0;
  for (const auto& hidden : r.networks) {
    auto network = stop_requested(r.interrupted) ? std::nullopt
                                                 : bench_network(r, hidden, dir->path(), code);
    if (!network) // interrupted: the networks before this one are written
      return out.finish(code, r.interrupted);
    out.add(std::move(*network));
  }
  std::printf("\nMiB/worker/round: what a worker sends per round of L local steps (IST: its "
              "subnet back to the shards;\nthe ring: L all-reduces; local SGD: one average), "
              "from the edges, next to the formula; seconds:\ninto training when the epoch's "
              "evaluation was complete (setup excluded)\n");
  return out.finish(code, r.interrupted);
}

namespace {

/// One `baton bench ist` flag into `r` (false: not one of its flags or a bad
/// value).
bool read_ist_flag(args& a, const std::string& flag, bench_ist_request& r) {
  std::string v;
  if (flag == "--quick")
    return r.quick = true;
  if (flag == "--json")
    return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
  if (flag == "--workers")
    return a.value(flag, v) && parse_int(flag, v, r.workers) && r.workers >= 2 &&
           r.workers <= 16;
  if (flag == "--epochs")
    return a.value(flag, v) && parse_int(flag, v, r.epochs) && r.epochs >= 1;
  if (flag == "--target") {
    if (!a.value(flag, v))
      return false;
    char* end = nullptr;
    r.target = std::strtod(v.c_str(), &end);
    return end && *end == '\0' && r.target > 0 && r.target <= 1;
  }
  if (flag == "--link")
    return a.value(flag, v) && parse_link(flag, v, r.link);
  return false;
}

} // namespace

int bench_ist_command(args& a, const std::atomic<bool>* interrupted) {
  bench_ist_request r;
  r.interrupted = interrupted;
  bool epochs_given = false;
  bool read = read_flags(a, "baton bench ist", [&](const std::string& flag) {
    epochs_given = epochs_given || flag == "--epochs";
    return read_ist_flag(a, flag, r);
  });
  if (r.quick) { // ~3-5 minutes on 2 cores: narrow networks, fewer samples
    r.networks = {{512}, {512, 512}};
    r.train_limit = 16384;
    r.test_limit = 2000;
    if (!epochs_given)
      r.epochs = 5;
  }
  return read ? bench_ist(r) : 2;
}

} // namespace bench
} // namespace baton::apps
