// `baton bench data-parallel`: W data-parallel workers on W node processes,
// under each exchange, against the one-thread local loop with the global
// batch, same model, same data, in one invocation.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <cmath>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/data_parallel/worker.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "apps/bench/step_split.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// One row of the table: its label and what it sets over the common sides.
struct dp_side {
  std::string name;                   ///< "local", "ring", "ps", ...
  std::string label;                  ///< "(a) local", ...
  std::vector<std::string> overrides; ///< over the common overrides
};

/// The rows: (a) one process, one compute thread, the global batch; (a")
/// the same loop with W threads, the W workers' computations at once (what a
/// user of `--mode local --threads W` gets, against PyTorch's W-thread
/// process); (b) the ring, each bucket all-reduced as the backward finishes
/// it, and (b') once the whole backward is done; (c) the parameter server;
/// (d) local SGD over the ring; (e) the parameter server with bounded
/// staleness.
std::vector<dp_side> sides_of(const bench_data_parallel_request& r) {
  auto w = std::to_string(r.workers);
  std::vector<dp_side> all{
    {"local", "(a) local",
     {"data_parallel.workers=1", "data.batch_size=" + std::to_string(r.workers * r.batch)}},
    {"local-threads", "(a\") local, " + w + "t", {"data_parallel.workers=" + w}},
    {"ring", "(b) ring", {"data_parallel.workers=" + w}},
    {"embedded", "(b\") embedded", {"data_parallel.workers=" + w}},
    {"ring-serial", "(b') ring, serial",
     {"data_parallel.workers=" + w, "data_parallel.overlap=false"}},
    {"ps", "(c) ps S=" + std::to_string(r.shards),
     {"data_parallel.workers=" + w, "data_parallel.exchange=ps",
      "data_parallel.shards=" + std::to_string(r.shards)}},
    {"local-sgd", "(d) local SGD L=" + std::to_string(r.sync_every),
     {"data_parallel.workers=" + w, "data_parallel.sync_every=" + std::to_string(r.sync_every)}},
    {"ps-stale", "(e) ps s=" + std::to_string(r.staleness),
     {"data_parallel.workers=" + w, "data_parallel.exchange=ps",
      "data_parallel.shards=" + std::to_string(r.shards),
      "data_parallel.max_staleness=" + std::to_string(r.staleness)}},
  };
  std::vector<dp_side> chosen;
  for (auto& s : all)
    if (s.name == "local" || r.sides.empty() ||
        std::find(r.sides.begin(), r.sides.end(), s.name) != r.sides.end())
      chosen.push_back(std::move(s));
  return chosen;
}

/// The overrides every side shares: the model, the data, one compute thread.
std::vector<std::string> common_overrides(const bench_data_parallel_request& r) {
  std::vector<std::string> o{"data_parallel.model=" + r.model,
                             "data.batch_size=" + std::to_string(r.batch),
                             "data.epochs=1",
                             "data.train_limit=" + std::to_string(r.train_limit),
                             "data.test_limit=1000",
                             "runtime.compute_threads=1"};
  if (r.model == "resnet18")
    o = {"data_parallel.model=resnet18", "data.dataset=synthetic",
         "data.synthetic_shape=[3, 32, 32]",
         "data.synthetic_train=" + std::to_string(r.train_limit), "data.synthetic_test=256",
         "data.batch_size=" + std::to_string(r.batch), "data.epochs=1",
         "runtime.compute_threads=1", "runtime.progress_every=1"};
  return o;
}

/// Bytes of the model's trainable parameters (float32): a worker's gradient.
int64_t gradient_bytes(const std::string& model) {
  model::model_spec spec;
  spec.name = model;
  spec.classes = 10;
  auto layout = model::make_flat_layout(data_parallel::make_worker_model(spec));
  return layout.trainable().size() * 4;
}

/// The mean over workers of each figure in seconds ("..._seconds": forward,
/// backward, exchange wait, overlap, step), per global step.
std::map<std::string, double> figures_per_step(const job_result& r, int64_t steps) {
  std::map<std::string, double> sum;
  int32_t workers = 0;
  for (const auto& a : r.actors) {
    if (a.role != "data_parallel_worker")
      continue;
    ++workers;
    const std::string seconds = "_seconds";
    for (const auto& f : a.figures)
      if (f.name.size() > seconds.size() &&
          f.name.compare(f.name.size() - seconds.size(), seconds.size(), seconds) == 0)
        sum[f.name] += f.value;
  }
  for (auto& [name, value] : sum)
    value /= std::max(1, workers) * static_cast<double>(std::max<int64_t>(1, steps));
  return sum;
}

/// Bytes one worker sends per step (its edges' bytes over the steps, mean
/// over workers) and bytes the shards send each worker per step.
std::pair<double, double> bytes_per_step(const job_result& r, int32_t workers, int64_t steps) {
  double up = 0;
  double down = 0;
  for (const auto& a : r.actors)
    for (const auto& e : a.edges)
      (a.role == "data_parallel_worker" ? up : down) += static_cast<double>(e.bytes);
  double per = static_cast<double>(workers) * static_cast<double>(std::max<int64_t>(1, steps));
  return {up / per, down / per};
}

/// The theory of bytes a worker sends per step under side `name` (and the
/// shards send it back, for ps).
std::pair<double, double> theory_of(const std::string& name, double gradient, int32_t workers,
                                    int32_t sync_every) {
  if (name == "ring" || name == "ring-serial" || name == "embedded")
    return {model::ring_bytes_theory(gradient, workers), 0};
  if (name == "local-sgd")
    return {model::ring_bytes_theory(gradient, workers) / sync_every, 0};
  if (name == "ps" || name == "ps-stale")
    return {gradient, gradient};
  return {0, 0};
}

/// "f/b/x/s" milliseconds per step of a side's workers ("-" when its
/// workers do not report the split).
std::string split_of(const std::map<std::string, double>& f) {
  auto get = [&](const char* name) {
    auto it = f.find(name);
    return it == f.end() ? -1.0 : 1000 * it->second;
  };
  if (get("backward_seconds") < 0)
    return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f/%.0f/%.0f/%.0f", get("forward_seconds"),
                get("backward_seconds"), get("exchange_wait_seconds"), get("step_seconds"));
  return buf;
}

/// Steps of one epoch of the bench's data under side `s`.
int64_t steps_of(const bench_data_parallel_request& r, const dp_side& s) {
  bool local = s.name == "local";
  return model::data_parallel_steps_per_epoch(r.train_limit, local ? 1 : r.workers,
                                              local ? r.workers * r.batch : r.batch,
                                              model::remainder_policy::pad);
}

/// What every row is compared with: (a)'s samples/s, the limit, the
/// PyTorch peers', the gradient's bytes.
struct references {
  double local_rate = 0; ///< (a): one thread, the global batch
  double limit = 0;      ///< W x one thread at the per-worker batch
  double pytorch = 0;    ///< PyTorch's W-thread process at the global batch (0: did not run)
  double ddp = 0;        ///< DDP gloo W x 1 (0: did not run)
  double gradient = 0;   ///< bytes
};

/// Prints one side's row and returns its JSON.
nlohmann::json report_side(const bench_data_parallel_request& r, const dp_side& s,
                           const side_run& run, const references& ref) {
  auto steps = steps_of(r, s);
  auto rate = samples_per_second(run.result);
  auto ratio = ref.local_rate > 0 ? rate / ref.local_rate : 0;
  auto figures = figures_per_step(run.result, steps);
  auto [up, down] = bytes_per_step(run.result, r.workers, steps);
  auto [theory_up, theory_down] = theory_of(s.name, ref.gradient, r.workers, r.sync_every);
  // The exchange's time: alongside the backward (overlap), then waited for.
  auto figure = [&](const char* name) { return figures.count(name) ? figures.at(name) : 0.0; };
  double alongside = figure("overlap_seconds");
  double waited = figure("exchange_wait_seconds");
  auto overlap = alongside > 0
                   ? std::to_string(std::lround(100 * alongside / (alongside + waited))) + "%"
                   : std::string{"-"};
  bool local = s.name == "local";
  std::printf("%-18s %9.1f %8s %8s %6.2fx %6.0f%% %15s %8s %7s/%-7s %7s/%-7s %6.1f%% %5.0f%%\n",
              s.label.c_str(), rate, ratio_cell(of_limit(rate, ref.limit), 8).c_str(),
              ratio_cell(of_limit(rate, ref.pytorch), 8, "x").c_str(), ratio,
              local ? 100.0 : 100 * ratio / r.workers,
              split_of(figures).c_str(), overlap.c_str(),
              mib(up).c_str(), mib(down).c_str(), mib(theory_up).c_str(),
              mib(theory_down).c_str(),
              100 * run.result.heads.front().test_accuracy, 100 * run.steal);
  std::fflush(stdout);
  nlohmann::json f = nlohmann::json::object();
  for (const auto& [name, value] : figures)
    f[name] = value;
  nlohmann::json row = {
    {"side", s.name}, {"label", s.label}, {"samples_per_second", rate},
    {"ratio", ratio}, {"limit_samples_per_second", ref.limit},
    {"of_limit", of_limit(rate, ref.limit)},
    {"pytorch_threads_samples_per_second", ref.pytorch},
    {"vs_pytorch_threads", of_limit(rate, ref.pytorch)},
    {"ddp_samples_per_second", ref.ddp}, {"vs_ddp", of_limit(rate, ref.ddp)},
    {"steps", steps}, {"seconds_per_step", f},
    {"bytes_sent_per_worker_step", up}, {"bytes_received_per_worker_step", down},
    {"theory_sent", theory_up}, {"theory_received", theory_down},
    {"test_accuracy", run.result.heads.front().test_accuracy},
    {"weights_digest", run.result.heads.front().weights_digest},
    {"steal_fraction", run.steal}};
  if (!local && s.name != "local-threads")
    row["step_split"] = split_of_data_parallel(run.result).to_json();
  return row;
}

void print_header(const bench_data_parallel_request& r) {
  std::printf("baton bench data-parallel: %s, model %s, W = %d workers x %lld samples per step, "
              "%lld training samples, %u cores, link %s, %d run(s) per side (median shown)\n"
              "  (a') local: the whole model in one process, one compute thread, the per-worker "
              "batch (%lld):\n       the limit is W x its samples/s\n"
              "  (a) local: the same with the global batch (W x %lld); (a\"): with W threads, "
              "the W workers' computations at once\n"
              "  (b)-(e): W workers on W node processes, one compute thread each\n"
              "  PyTorch peers: 1 thread at the per-worker batch, %d threads at the global "
              "batch, DDP gloo %dx1\n\n",
              r.quick ? "quick" : "full", r.model.c_str(), r.workers,
              static_cast<long long>(r.batch), static_cast<long long>(r.train_limit),
              std::thread::hardware_concurrency(), r.link.empty() ? "loopback" : r.link.c_str(),
              r.repeat, static_cast<long long>(r.batch), static_cast<long long>(r.batch), r.workers,
              r.workers);
}

void print_table_header(const bench_data_parallel_request& r) {
  auto w = std::to_string(r.workers);
  std::printf("\n%-18s %9s %8s %8s %7s %7s %15s %8s %15s %15s %7s %6s\n", "side", "samples/s",
              "of limit", ("vs PT " + w + "t").c_str(), "vs (a)", "effic.", "f/b/x/s ms/step",
              "overlap", "MiB/step out/in", "theory out/in", "test acc", "steal");
}

void print_data_parallel_legend() {
  std::printf(
    "\nsamples/s: training samples over training time after the warm-up (setup and the first 20 "
    "steps\nexcluded, as the peers exclude theirs); effic.: the ratio over W;\nf/b/x/s: a "
    "worker's forward, backward, wait for the exchange and optimizer step per step (ms,\nmean "
    "over workers); overlap: of the exchange's time (its first bucket on the "
    "ring to its end), the share\nspent alongside the backward; "
    "MiB/step out/in:\nwhat a worker sends (to its ring successor or the shards) and the shards "
    "send it, per step,\nnext to the theory (ring 2(W-1)/W x gradient bytes, divided by L for "
    "local SGD; ps: the gradient\nup, the parameters down); steal: CPU the hypervisor gave to "
    "other guests (noise);\n%s\n%s", peers_legend(), split_legend());
}

// -- the limit and the PyTorch peers ----------------------------------------------

/// (a'): one process, one compute thread, the per-worker batch: W x its
/// samples/s is the limit.
dp_side limit_side(const bench_data_parallel_request& r) {
  auto b = std::to_string(r.batch);
  return {"local-per-worker", "(a') local, b" + b,
          {"data_parallel.workers=1", "data.batch_size=" + b}};
}

/// A PyTorch peer of the bench: its name, row label, script and arguments.
struct dp_peer {
  std::string name;
  std::string label;
  std::string script;
  std::vector<std::string> args;
};

/// The peers: PyTorch with W threads at the global batch (what a user picks
/// for W cores), with 1 thread at the per-worker batch (the limit's side, in
/// PyTorch), DDP gloo W x 1 at the per-worker batch, and W one-thread
/// PyTorch processes side by side, sharing nothing (the host's own ceiling
/// under the limit: what W cores give W computations); the bench's optimizer,
/// about as many samples as the bench's sides train (2048 under --quick,
/// 512 for resnet18).
std::vector<dp_peer> peers_of(const bench_data_parallel_request& r) {
  auto w = std::to_string(r.workers);
  bool resnet = r.model == "resnet18";
  int64_t samples = r.quick ? (resnet ? 512 : 2048) : r.train_limit;
  auto common = [&](int64_t batch, int64_t per_step) {
    return std::vector<std::string>{
      "--model", r.model, "--batch", std::to_string(batch),
      "--steps", std::to_string(std::max<int64_t>(3, samples / per_step)),
      "--warmup", resnet ? "1" : "3", "--lr", "0.02", "--momentum", "0.9",
      "--train-limit", std::to_string(r.train_limit)};
  };
  auto global = r.workers * r.batch;
  auto threads = [&](int32_t t, int64_t batch) {
    auto a = common(batch, batch);
    a.insert(a.end(), {"--threads", std::to_string(t)});
    return a;
  };
  auto ddp = common(r.batch, global);
  ddp.insert(ddp.end(), {"--workers", w});
  auto apart = threads(1, r.batch);
  apart.insert(apart.end(), {"--copies", w, "--seconds", r.quick ? "3" : "6"});
  return {{"pytorch-" + w, "PyTorch " + w + " threads", "train_peer.py", threads(r.workers, global)},
          {"pytorch-1", "PyTorch 1 thread", "train_peer.py", threads(1, r.batch)},
          {"ddp", "DDP gloo " + w + "x1", "ddp_peer.py", ddp},
          {"pytorch-apart", "PyTorch " + w + "x1 apart", "train_peer.py", std::move(apart)}};
}

/// "  run 2/3 (b) ring   1001 samples/s": a run of a round, before the table.
void print_round(const bench_data_parallel_request& r, int32_t round, const std::string& label,
                 double rate) {
  if (r.repeat > 1)
    std::printf("  run %d/%d %-18s %.0f samples/s\n", round, r.repeat, label.c_str(), rate);
  else
    std::printf("  run %-18s %.0f samples/s\n", label.c_str(), rate);
  std::fflush(stdout);
}

/// Prints a row whose only figures are its samples/s (the limit, a peer).
void print_rate_row(const std::string& label, double rate, const references& ref,
                    double steal) {
  std::printf("%-18s %9.1f %8s %8s %7s %7s %15s %8s %7s %-7s %7s %-7s %7s %5.0f%%\n",
              label.c_str(), rate, ratio_cell(of_limit(rate, ref.limit), 8).c_str(),
              ratio_cell(of_limit(rate, ref.pytorch), 8, "x").c_str(), "-", "-", "-", "-", "-",
              "", "-", "", "-", 100 * steal);
}

/// Prints the table's header, then the rows of (a') (`one`, null when it
/// failed), the limit and the peers, and adds the peers to `out` ("peers").
void report_limit_and_peers(const bench_data_parallel_request& r, const side_run* one,
                            const std::vector<peer_run>& peers, const references& ref,
                            bench_figures& out) {
  print_table_header(r);
  if (one) {
    print_rate_row(limit_side(r).label, ref.limit / r.workers, ref, one->steal);
    print_rate_row("limit = " + std::to_string(r.workers) + " x (a')", ref.limit, ref, 0);
  }
  auto all = peers_of(r);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& run = peers[i];
    if (run.ran())
      print_rate_row(all[i].label, run.samples_per_second(), ref, run.steal);
    else
      std::printf("%-18s %s\n", all[i].label.c_str(), run.skipped.c_str());
    auto j = run.to_json(all[i].label);
    j["of_limit"] = of_limit(run.samples_per_second(), ref.limit);
    out.json()["peers"].push_back(std::move(j));
  }
  std::fflush(stdout);
}

/// The runs of (a') and the peers, every round's.
struct limit_runs {
  std::vector<side_run> one;                ///< (a'), the rounds it ran in
  std::vector<std::vector<peer_run>> peers; ///< per peer (peers_of's order), every round's
};

/// "-2" for round 2 of more: the name of a round's run (its files); "" for
/// a single round.
std::string round_suffix(const bench_data_parallel_request& r, int32_t round) {
  return r.repeat > 1 ? "-" + std::to_string(round) : "";
}

/// Runs (a') and the peers of round `round` into `runs`; after the last
/// round (before the table: every row then shows its ratios) sets `ref` from
/// their medians, prints their rows and writes them to the figures
/// ("limit", "peers"). False when stopped.
bool run_limit_and_peers(const bench_data_parallel_request& r, const std::string& topology,
                         const std::string& dir, int32_t round, limit_runs& runs,
                         references& ref, bench_figures& out, int& code) {
  auto side = limit_side(r);
  auto o = common_overrides(r);
  o.insert(o.end(), side.overrides.begin(), side.overrides.end());
  o.insert(o.end(), r.overrides.begin(), r.overrides.end());
  std::vector<std::string> flags{"--mode", "local", "--threads", "1"};
  auto one = run_row(topology, o, flags, dir, side.name + round_suffix(r, round), r.interrupted,
                     side.label, 18, code);
  if (stop_requested(r.interrupted))
    return false;
  if (one) {
    print_round(r, round, side.label, samples_per_second(one->result));
    one->round = round;
    runs.one.push_back(std::move(*one));
  }
  const auto all = peers_of(r);
  runs.peers.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& p = all[i];
    runs.peers[i].push_back(
      run_peer(p.script, p.args, dir, p.name + round_suffix(r, round), r.interrupted));
    if (stop_requested(r.interrupted))
      return false;
    const auto& run = runs.peers[i].back();
    if (run.ran())
      print_round(r, round, p.label, run.samples_per_second());
    else
      std::printf("  run %-18s %s\n", p.label.c_str(), run.skipped.c_str());
    std::fflush(stdout);
  }
  if (round < r.repeat)
    return true;
  const side_run* median = runs.one.empty() ? nullptr : &median_run(runs.one);
  double one_rate = median ? samples_per_second(median->result) : 0;
  ref.limit = r.workers * one_rate;
  std::vector<peer_run> peers;
  for (auto& rounds : runs.peers)
    peers.push_back(median_peer(rounds));
  ref.pytorch = peers.at(0).samples_per_second();
  ref.ddp = peers.at(2).samples_per_second();
  out.json()["limit"] = {{"one_thread_samples_per_second", one_rate}, {"workers", r.workers},
                         {"batch", r.batch}, {"limit_samples_per_second", ref.limit},
                         {"rounds", runs.one.size()},
                         {"command", side_command(topology, o, flags, dir, side.name)},
                         {"steal_fraction", median ? median->steal : 0.0}};
  report_limit_and_peers(r, median, peers, ref, out);
  return true;
}

} // namespace

int bench_data_parallel(const bench_data_parallel_request& r) {
  auto dir = bench_directory("baton-bench-data-parallel");
  if (!dir)
    return 1;
  print_header(r);
  const std::string topology = std::string{BATON_SOURCE_DIR} + "/configs/data-parallel.yaml";
  auto gradient = static_cast<double>(gradient_bytes(r.model));
  bench_figures out{r.json_out,
                    {{"bench", "data-parallel"}, {"quick", r.quick}, {"model", r.model},
                     {"workers", r.workers}, {"batch", r.batch}, {"repeat", r.repeat},
                     {"train_samples", r.train_limit}, {"link", r.link},
                     {"gradient_bytes", gradient}, {"peers", nlohmann::json::array()},
                     {"peer_glibc_tunables", peer_glibc_tunables}}};
  references ref;
  ref.gradient = gradient;
  int code = 0;
  // Rounds of every side, interleaved ((a'), the peers, (a), (b), ..., then
  // again), so that a slow spell of the host hits all sides; a row is the
  // median of its rounds, written after its last.
  limit_runs limit;
  std::map<std::string, std::vector<side_run>> rounds;
  std::vector<std::pair<std::string, step_split>> splits;
  std::vector<std::pair<std::string, side_rounds>> by_round; // per side, with --repeat
  for (int32_t round = 1; round <= r.repeat && !stop_requested(r.interrupted); ++round) {
    if (!run_limit_and_peers(r, topology, dir->path(), round, limit, ref, out, code))
      return out.finish(code, r.interrupted);
    for (const auto& s : sides_of(r)) {
      if (stop_requested(r.interrupted))
        break;
      auto o = common_overrides(r);
      o.insert(o.end(), s.overrides.begin(), s.overrides.end());
      o.insert(o.end(), r.overrides.begin(), r.overrides.end());
      std::vector<std::string> flags{"--mode", "local", "--threads", "1"};
      if (s.name == "local-threads")
        flags.back() = std::to_string(r.workers); // --threads W
      else if (s.name == "embedded")
        flags.clear(); // every worker in this process
      else if (s.name != "local")
        flags = with_link({"--local-nodes", std::to_string(r.workers)}, r.link);
      auto run = run_row(topology, o, flags, dir->path(), s.name + round_suffix(r, round),
                         r.interrupted, s.label, 18, code);
      if (run) {
        if (round < r.repeat)
          print_round(r, round, s.label, samples_per_second(run->result));
        run->round = round;
        rounds[s.name].push_back(std::move(*run));
      }
      if (round < r.repeat || rounds[s.name].empty())
        continue; // failed, or stopped: the rows of the sides before this one are written
      const auto& median = median_run(rounds[s.name]);
      if (s.name == "local")
        ref.local_rate = samples_per_second(median.result);
      else if (s.name != "local-threads") // no actors: no split
        splits.emplace_back(s.label, split_of_data_parallel(median.result));
      auto row = report_side(r, s, median, ref);
      const auto rates = rates_by_round(rounds[s.name]);
      side_rounds ratios{ratios_by_round(rates, rates_by_round(limit.one), r.workers),
                         ratios_by_round(rates, rates_by_round(limit.peers.at(0)), 1)};
      row["of_limit_by_round"] = ratios.of_limit;
      row["vs_pytorch_threads_by_round"] = ratios.vs_pytorch;
      if (r.repeat > 1 && !ratios.text().empty())
        by_round.emplace_back(s.label, std::move(ratios));
      out.add(std::move(row));
    }
  }
  if (!stop_requested(r.interrupted) && !by_round.empty()) {
    std::printf("\nround by round (each round's side over %d x that round's (a'), and over its "
                "PyTorch %d threads):\n", r.workers, r.workers);
    const auto peer = "PT " + std::to_string(r.workers) + "t";
    for (const auto& [label, ratios] : by_round)
      std::printf("%-18s %s\n", label.c_str(), ratios.text(peer).c_str());
  }
  if (!stop_requested(r.interrupted)) {
    std::printf("\n%s\n", split_header(18).c_str());
    for (const auto& [label, split] : splits)
      std::printf("%s\n", split_row(label, 18, split).c_str());
    print_data_parallel_legend();
  }
  return out.finish(code, r.interrupted);
}

namespace {

/// One `baton bench data-parallel` flag into `r` (false: not one of its flags
/// or a bad value).
bool read_data_parallel_flag(args& a, const std::string& flag,
                             bench_data_parallel_request& r) {
  std::string v;
  int32_t n = 0;
  if (flag == "--quick")
    return r.quick = true;
  if (flag == "--json")
    return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
  if (flag == "--model")
    return a.value(flag, v) && (v == "mlp" || v == "convnet" || v == "resnet18") &&
           (r.model = v, true);
  if (flag == "--workers")
    return a.value(flag, v) && parse_int(flag, v, r.workers) && r.workers >= 2 &&
           r.workers <= 16;
  if (flag == "--batch")
    return a.value(flag, v) && parse_int(flag, v, n) && n > 0 && (r.batch = n, true);
  if (flag == "--shards")
    return a.value(flag, v) && parse_int(flag, v, r.shards) && r.shards >= 1;
  if (flag == "--sync-every")
    return a.value(flag, v) && parse_int(flag, v, r.sync_every) && r.sync_every >= 1;
  if (flag == "--side")
    return a.value(flag, v) &&
           (v == "local-threads" || v == "ring" || v == "ring-serial" || v == "embedded" ||
            v == "ps" || v == "local-sgd" || v == "ps-stale") &&
           (r.sides.push_back(v), true);
  if (flag == "--set")
    return a.value(flag, v) && (r.overrides.push_back(v), true);
  if (flag == "--link")
    return a.value(flag, v) && parse_link(flag, v, r.link);
  if (flag == "--repeat")
    return a.value(flag, v) && parse_int(flag, v, r.repeat) && r.repeat > 0 && r.repeat <= 20;
  return false;
}

} // namespace

int bench_data_parallel_command(args& a, const std::atomic<bool>* interrupted) {
  bench_data_parallel_request r;
  r.interrupted = interrupted;
  bool read = read_flags(a, "baton bench data-parallel", [&](const std::string& flag) {
    return read_data_parallel_flag(a, flag, r);
  });
  if (r.quick)
    r.train_limit = 4096;
  return read ? bench_data_parallel(r) : 2;
}

} // namespace bench
} // namespace baton::apps
