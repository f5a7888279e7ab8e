// `baton bench pipeline`: the 2-stage pipeline against the one-thread local
// loop, same model, same data, in one invocation.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/planning.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "apps/bench/step_split.hpp"
#include "messages/errc.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// The topology each model is benchmarked with, and its data overrides.
/// resnet18 reports progress every step: a run is timed from its first
/// report, and its 4-32 steps of 128 samples hold no 20 to warm up over (its
/// peer warms up over one).
struct bench_model {
  std::string name;
  std::string topology; ///< under configs/
  std::vector<std::string> quick; ///< --quick overrides
  std::vector<std::string> full;  ///< full-run overrides
};

const std::vector<bench_model>& bench_models() {
  static const std::vector<bench_model> models{
    {"convnet", "configs/pipeline.yaml",
     {"data.train_limit=4096", "data.test_limit=512"},
     {"data.train_limit=0", "data.test_limit=2000"}},
    {"resnet18", "configs/pipeline-resnet18.yaml",
     {"data.synthetic_train=512", "data.synthetic_test=128", "runtime.progress_every=1"},
     {"data.synthetic_train=4096", "data.synthetic_test=256", "runtime.progress_every=1"}},
  };
  return models;
}

/// Every side trains minibatches of 128 samples, the PyTorch peers' batch;
/// the baton sides cut them into --microbatches (4 by default: 32 samples
/// each, gpipe's bubble over 2 stages 1/5 in theory), and the plan is made
/// for the microbatch the stages run.
constexpr int64_t bench_minibatch = 128;

int64_t microbatch_of(const bench_pipeline_request& r) {
  return bench_minibatch / r.microbatches;
}

double cpu_seconds(const job_result& r) {
  double sum = 0;
  for (const auto& n : r.nodes)
    sum += n.cpu_seconds;
  return sum;
}

/// gpipe's bubble with p stages and m microbatches per minibatch.
double gpipe_bubble(int32_t p, int32_t m) {
  return static_cast<double>(p - 1) / (m + p - 1);
}

struct stage_figures {
  std::vector<double> utilisation; ///< busy / (busy + idle), per stage
  double bubble = 0;               ///< mean over stages of bubble / (busy + bubble)
};

stage_figures stages_of(const job_result& r) {
  stage_figures f;
  int32_t n = 0;
  for (const auto& a : r.actors) {
    if (a.role != "pipeline_stage")
      continue;
    auto alive = a.busy_seconds + a.idle_seconds;
    f.utilisation.push_back(alive > 0 ? a.busy_seconds / alive : 0);
    auto training = a.busy_seconds + a.bubble_seconds;
    f.bubble += training > 0 ? a.bubble_seconds / training : 0;
    ++n;
  }
  if (n > 0)
    f.bubble /= n;
  return f;
}

std::string percentages(const std::vector<double>& xs) {
  std::string out;
  for (auto x : xs) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%.0f%%", out.empty() ? "" : "/", 100 * x);
    out += buf;
  }
  return out;
}

/// A planned 2-stage topology and how well the plan balances its stages.
struct planned_stages {
  std::string path; ///< the planned topology
  /// The stages' planned compute over W x the slowest's: the share of the
  /// limit this split reaches at best, with nothing lost to the runtime.
  double balance = 1;
  bool hands_on = false; ///< a stage hands its last layer's weight gradient on
};

/// Profiles the model for the stages' microbatch; the profile's path.
caf::expected<std::string> profile_for_stages(const bench_pipeline_request& r,
                                              const std::string& topology,
                                              const std::string& dir, const std::string& label) {
  profile_request p;
  p.topology_path = topology;
  p.out = dir + "/" + label + ".profile.json";
  p.microbatches = r.quick ? 10 : 20;
  p.microbatch_size = microbatch_of(r);
  if (auto profiled = run_profile(p); !profiled)
    return profiled.error();
  return p.out;
}

/// Plans two stages from `profile`, of whole layers or (hand_on) with the
/// cut's weight gradient handed on where the planner says that helps, into
/// `out`.
caf::expected<planned_stages> plan_two_stages(const std::string& profile,
                                              const std::string& topology,
                                              const std::string& out, bool hand_on) {
  plan_request q;
  q.profile_path = profile;
  q.machines = 2;
  q.straight = true;
  q.hand_on_weight_gradients = hand_on;
  q.out = out;
  q.topology_path = topology;
  auto planned = run_plan(q);
  if (!planned)
    return planned.error();
  double sum = 0;
  double slowest = 0;
  bool hands_on = false;
  for (const auto& stage : planned->stages) {
    sum += stage.compute_seconds;
    slowest = std::max(slowest, stage.compute_seconds);
    hands_on = hands_on || stage.weight_gradient_next;
  }
  auto stages = static_cast<double>(planned->stages.size());
  return planned_stages{out, slowest > 0 ? sum / (stages * slowest) : 1.0, hands_on};
}

/// Whether the bench runs 1f1b's static order: then it also plans the
/// stages with the cut's weight gradient handed on.
bool runs_static_1f1b(const bench_pipeline_request& r) {
  return std::find(r.schedules.begin(), r.schedules.end(), "1f1b") != r.schedules.end();
}

/// The side that runs 1f1b's static order over the plan that hands the
/// cut's weight gradient on (weight_gradient: next).
constexpr const char* handing_on_side = "1f1b-wg-next";

/// A pipeline side: a schedule over one of the plans.
struct pipeline_side {
  std::string name;     ///< the row's: the schedule, or handing_on_side
  std::string schedule; ///< pipeline.schedule
  const planned_stages* plan = nullptr;
};

/// The pipeline sides of a bench: the requested schedules, 1f1b's dynamic
/// order next to its static one (so that one run compares the two orders),
/// and, when the planner hands a weight gradient on (`handing_on`), 1f1b's
/// static order over that plan too.
std::vector<pipeline_side> sides_of(const bench_pipeline_request& r, const planned_stages& whole,
                                    const planned_stages* handing_on) {
  std::vector<pipeline_side> out;
  for (const auto& schedule : r.schedules) {
    out.push_back({schedule, schedule, &whole});
    if (schedule != "1f1b")
      continue;
    if (std::find(r.schedules.begin(), r.schedules.end(), "1f1b-dynamic") == r.schedules.end())
      out.push_back({"1f1b-dynamic", "1f1b-dynamic", &whole});
    if (handing_on != nullptr && handing_on->hands_on)
      out.push_back({handing_on_side, "1f1b", handing_on});
  }
  return out;
}

/// The plans a model's pipeline sides run.
struct bench_plans {
  planned_stages whole;                     ///< of whole layers
  std::optional<planned_stages> handing_on; ///< with 1f1b: weight gradients handed on
};

/// Profiles the model once and plans its stages: of whole layers, and with
/// 1f1b among the schedules, handing the cut's weight gradient on.
caf::expected<bench_plans> plan_sides(const bench_pipeline_request& r,
                                      const std::string& topology, const std::string& dir,
                                      const std::string& label) {
  auto profile = profile_for_stages(r, topology, dir, label);
  if (!profile)
    return profile.error();
  auto whole = plan_two_stages(*profile, topology, dir + "/" + label + ".planned.yaml", false);
  if (!whole)
    return whole.error();
  bench_plans plans{*whole, std::nullopt};
  if (!runs_static_1f1b(r))
    return plans;
  auto handing_on = plan_two_stages(*profile, topology,
                                    dir + "/" + label + ".planned-wg-next.yaml", true);
  if (!handing_on)
    return handing_on.error();
  plans.handing_on = *handing_on;
  return plans;
}

} // namespace

namespace {

/// A PyTorch peer of the pipeline bench: the whole model in one process.
struct pipeline_peer {
  std::string name;  ///< "pytorch-1"
  std::string label; ///< "PyTorch 1 thread"
  int32_t threads = 1;
  int32_t copies = 1; ///< processes side by side, sharing nothing
};

/// The peers: one thread (what (a) is in PyTorch), two threads (what a user
/// picks for 2 cores), and two one-thread processes side by side: the host's
/// own ceiling under the limit (what 2 cores give 2 computations).
const std::vector<pipeline_peer>& pipeline_peers() {
  static const std::vector<pipeline_peer> peers{{"pytorch-1", "PyTorch 1 thread", 1},
                                                {"pytorch-2", "PyTorch 2 threads", 2},
                                                {"pytorch-apart", "PyTorch 2x1 apart", 1, 2}};
  return peers;
}

/// train_peer.py's arguments for `model`: the sides' minibatch (one batch of
/// 4 x 32 samples per step: what a user of PyTorch picks) and optimizer, a
/// few seconds of steps under --quick.
std::vector<std::string> peer_args(const std::string& model, const pipeline_peer& peer,
                                   bool quick) {
  bool resnet = model == "resnet18";
  int32_t steps = resnet ? (quick ? 4 : 32) : (quick ? 16 : 64);
  std::vector<std::string> args{"--model", model, "--threads", std::to_string(peer.threads),
                                "--batch", std::to_string(bench_minibatch),
                                "--steps", std::to_string(steps), "--warmup", resnet ? "1" : "3",
                                "--lr", "0.01", "--momentum", "0.9",
                                "--train-limit", quick ? "4096" : "0"};
  if (peer.copies > 1)
    args.insert(args.end(), {"--copies", std::to_string(peer.copies), "--seconds",
                             quick ? "3" : "6"});
  return args;
}

/// The runs of one model: the baton sides ("local", then the schedules) and
/// the PyTorch peers, by name.
struct model_runs {
  std::map<std::string, std::vector<side_run>> sides;
  std::map<std::string, std::vector<peer_run>> peers;
};

/// Runs every side of one model and its PyTorch peers `repeat` times,
/// interleaved (local, the peers, each schedule, then again), so that a slow
/// spell of the host hits all sides.
caf::expected<model_runs> run_sides(const bench_pipeline_request& r, const std::string& name,
                                    const std::vector<pipeline_side>& pipelines,
                                    const std::vector<std::string>& overrides,
                                    const std::string& dir) {
  // (a) runs the plan of whole layers (every side but 1f1b-wg-next runs it).
  std::vector<pipeline_side> sides{{"local", "", pipelines.front().plan}};
  sides.insert(sides.end(), pipelines.begin(), pipelines.end());
  model_runs runs;
  for (int32_t rep = 1; rep <= r.repeat; ++rep) {
    for (const auto& [side, schedule, plan] : sides) {
      auto o = overrides;
      std::vector<std::string> flags{"--mode", "local", "--threads", "1"};
      if (side != "local") {
        o.insert(o.end(), {"pipeline.schedule=" + schedule, "runtime.compute_threads=1"});
        flags = r.embedded ? std::vector<std::string>{}
                           : with_link({"--local-nodes", "2"}, r.link);
      }
      steal_meter steal;
      auto label = name + "-" + side + "-" + std::to_string(rep);
      auto result = run_side(plan->path, o, flags, dir, label, r.interrupted);
      if (!result)
        return result.error() == errc::interrupted
                 ? result.error()
                 : make_error(errc::actor_failed, side + ": " + describe(result.error()));
      runs.sides[side].push_back({std::move(*result), steal.fraction(), rep});
      std::printf("  run %d/%d %-17s %8.1f samples/s\n", rep, r.repeat, side.c_str(),
                  samples_per_second(runs.sides[side].back().result));
      std::fflush(stdout);
      if (side != "local")
        continue;
      for (const auto& peer : pipeline_peers()) {
        auto run = run_peer("train_peer.py", peer_args(name, peer, r.quick), dir,
                            name + "-" + peer.name + "-" + std::to_string(rep), r.interrupted);
        if (stop_requested(r.interrupted))
          return make_error(errc::interrupted, "interrupted");
        if (run.ran())
          std::printf("  run %d/%d %-17s %8.1f samples/s\n", rep, r.repeat, peer.label.c_str(),
                      run.samples_per_second());
        else
          std::printf("  run %d/%d %-17s %s\n", rep, r.repeat, peer.label.c_str(),
                      run.skipped.c_str());
        std::fflush(stdout);
        runs.peers[peer.name].push_back(std::move(run));
      }
    }
  }
  return runs;
}

/// 1f1b's static order (repeatable) against its dynamic one (1f1b-dynamic):
/// the ratio of their median samples/s, when both ran.
void report_orders(const std::string& name, std::map<std::string, std::vector<side_run>>& runs,
                   nlohmann::json& out) {
  if (runs.count("1f1b") == 0 || runs.count("1f1b-dynamic") == 0)
    return;
  auto fixed = samples_per_second(median_run(runs.at("1f1b")).result);
  auto dynamic = samples_per_second(median_run(runs.at("1f1b-dynamic")).result);
  auto ratio = dynamic > 0 ? fixed / dynamic : 0.0;
  std::printf("%-9s 1f1b order: static %.1f, dynamic %.1f samples/s: static/dynamic %.2fx\n",
              "", fixed, dynamic, ratio);
  std::fflush(stdout);
  out["orders"].push_back({{"model", name},
                           {"static_samples_per_second", fixed},
                           {"dynamic_samples_per_second", dynamic},
                           {"static_over_dynamic", ratio}});
}

/// Each pipeline side's median samples/s against the host's own ceiling,
/// PyTorch's one-thread processes apart (the limit less what two computing
/// cores cost each other here), when that peer ran.
void report_ceiling(const std::vector<pipeline_side>& pipelines, const std::string& name,
                    model_runs& runs, nlohmann::json& out) {
  if (runs.peers.count("pytorch-apart") == 0)
    return;
  const auto& apart = median_peer(runs.peers.at("pytorch-apart"));
  auto ceiling = apart.samples_per_second();
  if (!apart.ran() || ceiling <= 0)
    return;
  std::string line;
  nlohmann::json ratios = nlohmann::json::object();
  for (const auto& side : pipelines) {
    auto ratio = samples_per_second(median_run(runs.sides.at(side.name)).result) / ceiling;
    char cell[64];
    std::snprintf(cell, sizeof cell, "%s %s %.2fx", line.empty() ? "" : ",", side.name.c_str(),
                  ratio);
    line += cell;
    ratios[side.name] = ratio;
  }
  std::printf("%-9s of the host's ceiling (PyTorch 2x1 apart, %.1f samples/s):%s\n", "", ceiling,
              line.c_str());
  std::fflush(stdout);
  out["ceilings"].push_back(
    {{"model", name}, {"apart_samples_per_second", ceiling}, {"of_ceiling", ratios}});
}

/// The stages of the bench's pipeline: the limit is this many one-thread sides.
constexpr int32_t bench_stages = 2;

/// Prints a row of a side whose only figures are its rate: the limit, a peer.
void print_rate_row(const std::string& label, double rate, double limit, double local_rate,
                    double peer_rate, double steal) {
  std::printf("%-9s %-17s %9.1f %8s %7s %8s %11s %7s %7s %10s %9s %5.0f%%\n", "", label.c_str(),
              rate, ratio_cell(of_limit(rate, limit), 8).c_str(),
              ratio_cell(of_limit(rate, local_rate), 7, "x").c_str(),
              ratio_cell(of_limit(rate, peer_rate), 8, "x").c_str(), "-", "-", "-", "-", "-",
              100 * steal);
}

/// The 2-thread peer's median samples/s (0 when it did not run).
double pytorch_rate(model_runs& runs) {
  return runs.peers.count("pytorch-2") ? median_peer(runs.peers.at("pytorch-2")).samples_per_second()
                                       : 0.0;
}

/// Prints the limit, the splits' bounds and the PyTorch peers' rows and adds
/// them to `out` ("limits", "peers").
void report_limit_and_peers(const std::string& name, model_runs& runs,
                            const std::vector<pipeline_side>& pipelines, double limit,
                            double local_rate, double peer_rate, nlohmann::json& out) {
  print_rate_row("limit = 2 x (a)", limit, limit, local_rate, peer_rate, 0);
  const double balance = pipelines.front().plan->balance;
  print_rate_row("the split's bound", balance * limit, limit, local_rate, peer_rate, 0);
  nlohmann::json limits = {{"model", name},
                           {"one_thread_samples_per_second", local_rate},
                           {"stages", bench_stages},
                           {"limit_samples_per_second", limit},
                           {"split_balance", balance},
                           {"split_bound_samples_per_second", balance * limit}};
  for (const auto& side : pipelines)
    if (side.name == handing_on_side) {
      const double handed = side.plan->balance;
      print_rate_row("bound, wg next", handed * limit, limit, local_rate, peer_rate, 0);
      limits["wg_next_split_balance"] = handed;
      limits["wg_next_split_bound_samples_per_second"] = handed * limit;
    }
  out["limits"].push_back(std::move(limits));
  for (const auto& peer : pipeline_peers()) {
    if (runs.peers.count(peer.name) == 0)
      continue;
    const auto& run = median_peer(runs.peers.at(peer.name));
    auto rate = run.samples_per_second();
    if (run.ran())
      print_rate_row(peer.label, rate, limit, local_rate, peer_rate, run.steal);
    else
      std::printf("%-9s %-17s %s\n", "", peer.label.c_str(), run.skipped.c_str());
    auto j = run.to_json(peer.label);
    j["model"] = name;
    j["of_limit"] = of_limit(rate, limit);
    out["peers"].push_back(std::move(j));
  }
}

/// A pipeline side's ratios round by round: over 2 x (a) and over PyTorch's
/// 2 threads of the same round.
side_rounds by_round(const model_runs& runs, const std::string& name) {
  const auto side = rates_by_round(runs.sides.at(name));
  side_rounds out{ratios_by_round(side, rates_by_round(runs.sides.at("local")), bench_stages)};
  if (auto peer = runs.peers.find("pytorch-2"); peer != runs.peers.end())
    out.vs_pytorch = ratios_by_round(side, rates_by_round(peer->second), 1);
  return out;
}

/// With more than one round, each pipeline side's ratios round by round
/// (`rounds`: by label, as report_model took them).
void print_rounds(const bench_pipeline_request& r,
                  const std::vector<std::pair<std::string, side_rounds>>& rounds) {
  if (r.repeat < 2)
    return;
  std::printf("%-9s round by round (each round's side over %d x that round's (a), and over its "
              "PyTorch 2 threads):\n", "", bench_stages);
  for (const auto& [label, ratios] : rounds)
    if (auto text = ratios.text(); !text.empty())
      std::printf("%-9s %-17s %s\n", "", label.c_str(), text.c_str());
  std::fflush(stdout);
}

/// Prints one model's rows (the local side, the limit, the PyTorch peers,
/// then each pipeline side's median run), then where each side's step went,
/// and adds them to `out`.
void report_model(const bench_pipeline_request& r, const std::string& name, model_runs& runs,
                  const std::vector<pipeline_side>& pipelines, nlohmann::json& out) {
  const auto& local = median_run(runs.sides.at("local"));
  auto local_rate = samples_per_second(local.result);
  auto limit = bench_stages * local_rate;
  auto peer_rate = pytorch_rate(runs);
  std::printf("\n%-9s %-17s %9s %8s %7s %8s %11s %7s %7s %10s %9s %6s\n", name.c_str(), "side",
              "samples/s", "of limit", "vs (a)", "vs PT 2t", "stage busy", "bubble", "theory",
              "CPU beyond", "extra CPU", "steal");
  std::printf("%-9s %-17s %9.1f %8s %7s %8s %11s %7s %7s %10s %9s %5.0f%%\n", "",
              "(a) local", local_rate, ratio_cell(of_limit(local_rate, limit), 8).c_str(),
              "1.00x", ratio_cell(of_limit(local_rate, peer_rate), 8, "x").c_str(), "-", "-",
              "-", "-", "-", 100 * local.steal);
  report_limit_and_peers(name, runs, pipelines, limit, local_rate, peer_rate, out);
  std::vector<std::pair<std::string, step_split>> splits;
  std::vector<std::pair<std::string, side_rounds>> rounds_of; // per pipeline side
  for (const auto& [label, schedule, plan] : pipelines) {
    const auto& side = median_run(runs.sides.at(label));
    auto rate = samples_per_second(side.result);
    auto ratio = rate / local_rate;
    auto figures = stages_of(side.result);
    auto theory = schedule.rfind("1f1b", 0) == 0 && schedule != "1f1b-flush"
                    ? 0.0
                    : gpipe_bubble(2, r.microbatches);
    auto split = split_of_pipeline(side.result);
    auto rounds = by_round(runs, label);
    auto overhead = std::max(0.0, split.cpu_beyond_compute);
    auto extra_cpu = cpu_seconds(side.result) / cpu_seconds(local.result) - 1;
    std::printf("%-9s %-17s %9.1f %8s %6.2fx %8s %11s %6.1f%% %6.1f%% %9.1f%% %8.1f%% %5.0f%%\n",
                "", ("(b) " + label).c_str(), rate,
                ratio_cell(of_limit(rate, limit), 8).c_str(), ratio,
                ratio_cell(of_limit(rate, peer_rate), 8, "x").c_str(),
                percentages(figures.utilisation).c_str(), 100 * figures.bubble, 100 * theory,
                100 * overhead, 100 * extra_cpu, 100 * side.steal);
    std::fflush(stdout);
    splits.emplace_back("(b) " + label, split);
    rounds_of.emplace_back("(b) " + label, rounds);
    out["results"].push_back({{"model", name},
                              {"side", label},
                              {"schedule", schedule},
                              {"weight_gradient", plan->hands_on ? "next" : "here"},
                              {"local_samples_per_second", local_rate},
                              {"pipeline_samples_per_second", rate},
                              {"ratio", ratio},
                              {"limit_samples_per_second", limit},
                              {"of_limit", of_limit(rate, limit)},
                              {"of_limit_by_round", rounds.of_limit},
                              {"vs_pytorch_2_threads_by_round", rounds.vs_pytorch},
                              {"pytorch_2_threads_samples_per_second", peer_rate},
                              {"vs_pytorch_2_threads", of_limit(rate, peer_rate)},
                              {"step_split", split.to_json()},
                              {"stage_utilisation", figures.utilisation},
                              {"bubble_fraction", figures.bubble},
                              {"theoretical_bubble_fraction", theory},
                              {"overhead_fraction", overhead},
                              {"extra_cpu_fraction", extra_cpu},
                              {"local_steal_fraction", local.steal},
                              {"pipeline_steal_fraction", side.steal}});
  }
  print_rounds(r, rounds_of);
  report_orders(name, runs.sides, out);
  report_ceiling(pipelines, name, runs, out);
  std::printf("\n%-9s %s\n", "", split_header(17).c_str());
  for (const auto& [label, split] : splits)
    std::printf("%-9s %s\n", "", split_row(label, 17, split).c_str());
}

/// What the legend under the tables means.
void print_pipeline_legend() {
  std::printf(
    "\nsamples/s: training samples over training time after the warm-up (setup and the first 20 "
    "steps\nexcluded, resnet18's first step only, as the peers exclude theirs; the evaluations "
    "too);\nstage busy: each stage's compute over its life; bubble: a stage's idle time between "
    "two pieces\nof training work over its training time (mean of the stages); theory: "
    "(p-1)/(m+p-1) for p = 2\nstages, m microbatches a minibatch (--microbatches), flush "
    "schedules, 0 for 1f1b; the split's bound:\nthe limit x the planned stages' compute over 2 x "
    "the slowest's (what this split reaches with no\nruntime cost); CPU beyond: CPU of the "
    "stages' processes while "
    "training beyond the stages' computations\n(messages, wire, CAF, the source) over those "
    "computations; extra CPU: CPU seconds of every\nprocess of (b) (starting included) over "
    "(a)'s, minus 1; steal: CPU time the hypervisor gave to\nother guests during the run "
    "(noise); 1f1b order: 1f1b (PipeDream's static order, repeatable)\nagainst 1f1b-dynamic "
    "(a waiting backward first, a forward whenever a "
    "credit returns), median samples/s;\n1f1b-wg-next: 1f1b's static order over the plan of "
    "`baton plan --straight --weight-gradient next`\n(the second stage computes the weight "
    "gradient of the first stage's last convolution; run when\nthat plan differs); bound, wg "
    "next: that plan's bound;\n%s\n%s", peers_legend(), split_legend());
}

/// The topology overrides of one model's sides.
std::vector<std::string> overrides_of(const bench_pipeline_request& r, const bench_model& m) {
  auto overrides = r.quick ? m.quick : m.full;
  // 1f1b steps after every microbatch, 4 times as often as the other
  // sides, and diverged at the topology's lr of 0.05 with momentum 0.9: the
  // bench trains at lr 0.01 on every side (it measures speed, not accuracy).
  overrides.insert(overrides.end(),
                   {"data.microbatches=" + std::to_string(r.microbatches),
                    "data.batch_size=" + std::to_string(bench_minibatch),
                    "backbone.pretrain.optimizer.lr=0.01"});
  return overrides;
}

} // namespace

int bench_pipeline(const bench_pipeline_request& r) {
  auto dir = bench_directory("baton-bench-pipeline"); // a failed side's log tail is in its error
  if (!dir)
    return 1;
  std::printf("baton bench pipeline: %s, %u cores, %d run(s) per side (median shown), "
              "minibatches of %lld samples in %d microbatches of %lld\n"
              "  (a) local: the whole model in one process, one compute thread\n"
              "  (b) 2 stages (planned by `baton plan --straight`) %s, one compute thread "
              "each\n",
              r.quick ? "quick" : "full", std::thread::hardware_concurrency(), r.repeat,
              static_cast<long long>(bench_minibatch), r.microbatches,
              static_cast<long long>(microbatch_of(r)),
              r.embedded ? "in one process (embedded)" : "on 2 node processes");
  if (runs_static_1f1b(r))
    std::printf("      1f1b-wg-next: 1f1b over the plan of `baton plan --straight "
                "--weight-gradient next` (when it differs)\n");
  nlohmann::json out = {{"bench", "pipeline"}, {"quick", r.quick}, {"repeat", r.repeat},
                        {"microbatches", r.microbatches},
                        {"microbatch_size", microbatch_of(r)},
                        {"cores", std::thread::hardware_concurrency()},
                        {"results", nlohmann::json::array()},
                        {"orders", nlohmann::json::array()},
                        {"limits", nlohmann::json::array()},
                        {"peers", nlohmann::json::array()},
                        {"peer_glibc_tunables", peer_glibc_tunables}};
  int code = 0;
  for (const auto& name : r.models) {
    if (stop_requested(r.interrupted))
      break;
    const bench_model* m = nullptr;
    for (const auto& candidate : bench_models())
      if (candidate.name == name)
        m = &candidate;
    if (m == nullptr) {
      spdlog::error("bench pipeline: unknown model '{}' (convnet, resnet18)", name);
      return 2;
    }
    auto overrides = overrides_of(r, *m);
    auto planned = plan_sides(r, std::string{BATON_SOURCE_DIR} + "/" + m->topology, dir->path(),
                              name);
    if (!planned || stop_requested(r.interrupted)) {
      if (stop_requested(r.interrupted))
        break;
      spdlog::error("{}: {}", name, describe(planned.error()));
      code = 1;
      continue;
    }
    const auto pipelines =
      sides_of(r, planned->whole, planned->handing_on ? &*planned->handing_on : nullptr);
    auto runs = run_sides(r, name, pipelines, overrides, dir->path());
    if (!runs) {
      if (stop_requested(r.interrupted))
        break; // the rows of the models before this one are written
      spdlog::error("{}: {}", name, describe(runs.error()));
      code = 1;
      continue;
    }
    report_model(r, name, *runs, pipelines, out);
  }
  if (!stop_requested(r.interrupted))
    print_pipeline_legend();
  return bench_figures{r.json_out, std::move(out)}.finish(code, r.interrupted);
}

int bench_pipeline_command(args& a, const std::atomic<bool>* interrupted) {
  bench_pipeline_request r;
  r.interrupted = interrupted;
  std::string v;
  bool read = read_flags(a, "baton bench pipeline", [&](const std::string& flag) {
    if (flag == "--quick")
      return r.quick = true;
    if (flag == "--json")
      return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
    if (flag == "--model")
      return a.value(flag, v) && (v == "convnet" || v == "resnet18") && (r.models = {v}, true);
    if (flag == "--schedule")
      return a.value(flag, v) && (v == "gpipe" || v == "1f1b-flush" || v == "1f1b" || v == "1f1b-dynamic") &&
             (r.schedules = {v}, true);
    if (flag == "--repeat")
      return a.value(flag, v) && parse_int(flag, v, r.repeat) && r.repeat > 0;
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    if (flag == "--embedded")
      return r.embedded = true;
    if (flag == "--microbatches")
      return a.value(flag, v) && parse_int(flag, v, r.microbatches) &&
             (r.microbatches == 2 || r.microbatches == 4 || r.microbatches == 8);
    return false;
  });
  if (read && r.embedded && !r.link.empty()) {
    std::fprintf(stderr, "baton bench pipeline: --link shapes the link between node processes; "
                         "--embedded has none\n");
    return 2;
  }
  return read ? bench_pipeline(r) : 2;
}

} // namespace bench
} // namespace baton::apps
