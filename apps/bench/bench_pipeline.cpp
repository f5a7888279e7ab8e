// `baton bench pipeline`: the 2-stage pipeline against the one-thread local
// loop, same model, same data, in one invocation.

#include <algorithm>
#include <cstdio>
#include <map>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/planning.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "messages/errc.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// The topology each model is benchmarked with, and its data overrides.
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
     {"data.synthetic_train=512", "data.synthetic_test=128"},
     {"data.synthetic_train=2048", "data.synthetic_test=256"}},
  };
  return models;
}

/// Every side trains minibatches of 4 microbatches of 32 samples: gpipe's
/// bubble over 2 stages is then 1/5 in theory, and the plan is made for the
/// microbatch the stages run.
constexpr int32_t bench_microbatches = 4;
constexpr int64_t bench_microbatch = 32;

double cpu_seconds(const job_result& r) {
  double sum = 0;
  for (const auto& n : r.nodes)
    sum += n.cpu_seconds;
  return sum;
}

/// The actor and wire overhead of a pipeline run: CPU seconds its stages'
/// processes spent while they trained beyond the stages' computations
/// (forward, backward, step, evaluation), over those computations. It covers
/// messages, serialisation, sockets, CAF's threads and the source.
double overhead_of(const job_result& r) {
  double compute = 0;
  double process = 0;
  for (const auto& a : r.actors)
    if (a.role == "pipeline_stage") {
      compute += a.compute_cpu_seconds;
      process += a.process_cpu_seconds;
    }
  return compute > 0 ? process / compute - 1 : 0;
}

/// The run with the median training samples/s of `runs` (not empty).
const side_run& median_run(std::vector<side_run>& runs) {
  std::sort(runs.begin(), runs.end(), [](const side_run& a, const side_run& b) {
    return samples_per_second(a.result) < samples_per_second(b.result);
  });
  return runs[runs.size() / 2];
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

/// Profiles the model and plans two stages; the planned topology's path.
caf::expected<std::string> plan_two_stages(const std::string& topology, const std::string& dir,
                                           const std::string& label, bool quick) {
  profile_request p;
  p.topology_path = topology;
  p.out = dir + "/" + label + ".profile.json";
  p.microbatches = quick ? 10 : 20;
  p.microbatch_size = bench_microbatch;
  if (auto profiled = run_profile(p); !profiled)
    return profiled.error();
  plan_request q;
  q.profile_path = p.out;
  q.machines = 2;
  q.straight = true;
  q.out = dir + "/" + label + ".planned.yaml";
  q.topology_path = topology;
  if (auto planned = run_plan(q); !planned)
    return planned.error();
  return q.out;
}

/// The schedules a bench runs: the requested ones, and 1f1b's dynamic order
/// next to its static one, so that one run compares the two orders.
std::vector<std::string> schedules_of(const bench_pipeline_request& r) {
  std::vector<std::string> out;
  for (const auto& schedule : r.schedules) {
    out.push_back(schedule);
    if (schedule == "1f1b" && std::find(r.schedules.begin(), r.schedules.end(),
                                        "1f1b-dynamic") == r.schedules.end())
      out.push_back("1f1b-dynamic");
  }
  return out;
}

} // namespace

namespace {

/// Runs every side of one model `repeat` times, interleaved (local, then each
/// schedule, then again), so that a slow spell of the host hits all sides.
/// The runs by side: "local", then the schedules.
caf::expected<std::map<std::string, std::vector<side_run>>>
run_sides(const bench_pipeline_request& r, const std::string& name, const std::string& planned,
          const std::vector<std::string>& overrides, const std::string& dir) {
  std::vector<std::string> sides{"local"};
  auto schedules = schedules_of(r);
  sides.insert(sides.end(), schedules.begin(), schedules.end());
  std::map<std::string, std::vector<side_run>> runs;
  for (int32_t rep = 1; rep <= r.repeat; ++rep) {
    for (const auto& side : sides) {
      auto o = overrides;
      std::vector<std::string> flags{"--mode", "local", "--threads", "1"};
      if (side != "local") {
        o.insert(o.end(), {"pipeline.schedule=" + side, "runtime.compute_threads=1"});
        flags = with_link({"--local-nodes", "2"}, r.link);
      }
      steal_meter steal;
      auto label = name + "-" + side + "-" + std::to_string(rep);
      auto result = run_side(planned, o, flags, dir, label, r.interrupted);
      if (!result)
        return result.error() == errc::interrupted
                 ? result.error()
                 : make_error(errc::actor_failed, side + ": " + describe(result.error()));
      runs[side].push_back({std::move(*result), steal.fraction()});
      std::printf("  run %d/%d %-13s %8.1f samples/s\n", rep, r.repeat, side.c_str(),
                  samples_per_second(runs[side].back().result));
      std::fflush(stdout);
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

/// Prints one model's rows (the local side, then each schedule's median
/// run) and adds them to `out`.
void report_model(const bench_pipeline_request& r, const std::string& name,
                  std::map<std::string, std::vector<side_run>>& runs,
                  nlohmann::json& out) {
  const auto& local = median_run(runs.at("local"));
  auto local_rate = samples_per_second(local.result);
  std::printf("\n%-9s %-16s %9s %7s %11s %7s %7s %9s %9s %6s\n", name.c_str(), "side",
              "samples/s", "vs (a)", "stage busy", "bubble", "theory", "overhead",
              "extra CPU", "steal");
  std::printf("%-9s %-16s %9.1f %7s %11s %7s %7s %9s %9s %5.0f%%\n", "", "(a) local",
              local_rate, "1.00x", "-", "-", "-", "-", "-", 100 * local.steal);
  for (const auto& schedule : schedules_of(r)) {
    const auto& side = median_run(runs.at(schedule));
    auto rate = samples_per_second(side.result);
    auto ratio = rate / local_rate;
    auto figures = stages_of(side.result);
    auto theory = schedule.rfind("1f1b", 0) == 0 && schedule != "1f1b-flush"
                    ? 0.0
                    : gpipe_bubble(2, bench_microbatches);
    auto overhead = overhead_of(side.result);
    auto extra_cpu = cpu_seconds(side.result) / cpu_seconds(local.result) - 1;
    std::printf("%-9s %-16s %9.1f %6.2fx %11s %6.1f%% %6.1f%% %8.1f%% %8.1f%% %5.0f%%\n", "",
                ("(b) " + schedule).c_str(), rate, ratio,
                percentages(figures.utilisation).c_str(), 100 * figures.bubble, 100 * theory,
                100 * overhead, 100 * extra_cpu, 100 * side.steal);
    std::fflush(stdout);
    out["results"].push_back({{"model", name},
                              {"schedule", schedule},
                              {"local_samples_per_second", local_rate},
                              {"pipeline_samples_per_second", rate},
                              {"ratio", ratio},
                              {"stage_utilisation", figures.utilisation},
                              {"bubble_fraction", figures.bubble},
                              {"theoretical_bubble_fraction", theory},
                              {"overhead_fraction", overhead},
                              {"extra_cpu_fraction", extra_cpu},
                              {"local_steal_fraction", local.steal},
                              {"pipeline_steal_fraction", side.steal}});
  }
  report_orders(name, runs, out);
}

/// What the legend under the tables means.
void print_legend() {
  std::printf(
    "\nsamples/s: training samples over training time (setup excluded, the final evaluation "
    "included);\nstage busy: each stage's compute over its life; bubble: a stage's idle time "
    "between two pieces\nof training work over its training time (mean of the stages); theory: "
    "(p-1)/(m+p-1) for p = 2\nstages, m = 4 microbatches (flush schedules), 0 for 1f1b; "
    "overhead: CPU of the stages' processes\nwhile training beyond the stages' computations "
    "(messages, wire, CAF, the source) over those\ncomputations; extra CPU: CPU seconds of every "
    "process of (b) (starting included) over (a)'s,\nminus 1; steal: CPU time the hypervisor "
    "gave to other guests during the run (noise);\n1f1b order: 1f1b (PipeDream's static "
    "order, repeatable) against 1f1b-dynamic (a waiting\nbackward first, a forward whenever a "
    "credit returns), median samples/s.\n");
}

/// The topology overrides of one model's sides.
std::vector<std::string> overrides_of(const bench_model& m, bool quick) {
  auto overrides = quick ? m.quick : m.full;
  // 1f1b steps after every microbatch, 4 times as often as the other
  // sides, and diverged at the topology's lr of 0.05 with momentum 0.9: the
  // bench trains at lr 0.01 on every side (it measures speed, not accuracy).
  overrides.insert(overrides.end(),
                   {"data.microbatches=" + std::to_string(bench_microbatches),
                    "data.batch_size=" + std::to_string(bench_microbatches * bench_microbatch),
                    "backbone.pretrain.optimizer.lr=0.01"});
  return overrides;
}

} // namespace

int bench_pipeline(const bench_pipeline_request& r) {
  auto dir = bench_directory("baton-bench-pipeline"); // a failed side's log tail is in its error
  if (!dir)
    return 1;
  std::printf("baton bench pipeline: %s, %u cores, %d run(s) per side (median shown)\n"
              "  (a) local: the whole model in one process, one compute thread\n"
              "  (b) 2 stages (planned by `baton plan --straight`) on 2 node processes, one "
              "compute thread each\n",
              r.quick ? "quick" : "full", std::thread::hardware_concurrency(), r.repeat);
  nlohmann::json out = {{"bench", "pipeline"}, {"quick", r.quick}, {"repeat", r.repeat},
                        {"cores", std::thread::hardware_concurrency()},
                        {"results", nlohmann::json::array()},
                        {"orders", nlohmann::json::array()}};
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
    auto overrides = overrides_of(*m, r.quick);
    auto planned = plan_two_stages(std::string{BATON_SOURCE_DIR} + "/" + m->topology,
                                   dir->path(), name, r.quick);
    if (!planned || stop_requested(r.interrupted)) {
      if (stop_requested(r.interrupted))
        break;
      spdlog::error("{}: {}", name, describe(planned.error()));
      code = 1;
      continue;
    }
    auto runs = run_sides(r, name, *planned, overrides, dir->path());
    if (!runs) {
      if (stop_requested(r.interrupted))
        break; // the rows of the models before this one are written
      spdlog::error("{}: {}", name, describe(runs.error()));
      code = 1;
      continue;
    }
    report_model(r, name, *runs, out);
  }
  if (!stop_requested(r.interrupted))
    print_legend();
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
      return a.value(flag, r.json_out);
    if (flag == "--model")
      return a.value(flag, v) && (v == "convnet" || v == "resnet18") && (r.models = {v}, true);
    if (flag == "--schedule")
      return a.value(flag, v) && (v == "gpipe" || v == "1f1b-flush" || v == "1f1b" || v == "1f1b-dynamic") &&
             (r.schedules = {v}, true);
    if (flag == "--repeat")
      return a.value(flag, v) && parse_int(flag, v, r.repeat) && r.repeat > 0;
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    return false;
  });
  return read ? bench_pipeline(r) : 2;
}

} // namespace bench
} // namespace baton::apps
