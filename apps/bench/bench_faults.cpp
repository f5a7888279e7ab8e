// `baton bench faults`: the same job fault-free and with a SIGKILLed node,
// side by side.

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "apps/bench/bench.hpp"
#include "messages/errc.hpp"

namespace baton::apps {
inline namespace bench {

namespace {

/// The samples the bench trains (one epoch) and a minibatch of them (2
/// microbatches of 32): its steps.
int64_t fault_bench_samples(bool quick) { return quick ? 2048 : 8192; }
constexpr int64_t fault_bench_minibatch = 64;

/// Every trainable actor's digest, by name.
std::map<std::string, std::string> digests(const job_result& r) {
  std::map<std::string, std::string> out;
  for (const auto& a : r.actors)
    if (!a.weights_digest.empty())
      out[a.actor] = a.weights_digest;
  return out;
}

bool same_counts(const job_result& a, const job_result& b) {
  if (a.trained.size() != b.trained.size())
    return false;
  for (const auto& [actor, count] : a.trained) {
    auto it = b.trained.find(actor);
    if (it == b.trained.end() || it->second.trained != count.trained ||
        count.duplicates != 0 || it->second.duplicates != 0)
      return false;
  }
  return true;
}

/// The two runs side by side, and what the columns mean.
void print_table(const job_result& clean, const job_result& faulty, bool same_weights,
                 bool exactly_once) {
  std::printf("\n%-10s %9s %9s %12s %12s %9s %13s %13s\n", "run", "wall s", "ratio",
              "detected ms", "recovered ms", "restored", "same weights", "exactly once");
  std::printf("%-10s %9.1f %9s %12s %12s %9s %13s %13s\n", "clean", clean.wall_seconds,
              "1.00x", "-", "-", "-", "-", "-");
  auto fault = faulty.faults.empty() ? fault_record{} : faulty.faults.front();
  std::printf("%-10s %9.1f %8.2fx %12lld %12lld %9lld %13s %13s\n", "faulty",
              faulty.wall_seconds, faulty.wall_seconds / clean.wall_seconds,
              static_cast<long long>(fault.detected_after_ms),
              static_cast<long long>(fault.recovered_after_ms),
              static_cast<long long>(fault.restored_step), same_weights ? "yes" : "NO",
              exactly_once ? "yes" : "NO");
  std::printf("\ndetected: from the kill to the coordinator noticing the lost node; "
              "recovered: from then\nuntil every actor was restarted from the checkpoint of "
              "the restored step and wired again.\n");
}

} // namespace

int bench_faults(const bench_faults_request& r) {
  auto dir = bench_directory("baton-bench-faults"); // a failed side's log tail is in its error
  if (!dir)
    return 1;
  const int64_t samples = fault_bench_samples(r.quick);
  const int64_t steps = samples / fault_bench_minibatch;
  auto kill_at = r.kill_at == "half" ? steps / 2 : std::stoll(r.kill_at);
  std::vector<std::string> overrides{
    "data.train_limit=" + std::to_string(samples), "data.test_limit=1000",
    "data.microbatches=2", "pipeline.schedule=gpipe", "runtime.checkpoint_every=8"};
  std::string topology = std::string{BATON_SOURCE_DIR} + "/configs/pipeline.yaml";
  std::printf("baton bench faults: configs/pipeline.yaml, gpipe, %lld samples (%lld steps), "
              "checkpoints every 8 steps, 3 local node processes\n"
              "  faulty: node n2 (stage 0) SIGKILLs itself after step %lld\n",
              static_cast<long long>(samples), static_cast<long long>(steps),
              static_cast<long long>(kill_at));
  std::fflush(stdout);
  auto clean = run_side(topology, overrides, with_link({"--local-nodes", "3"}, r.link), dir->path(),
                        "clean", r.interrupted);
  // Interrupted: no figures (they compare both runs), --json FILE untouched.
  if (stop_requested(r.interrupted))
    return interrupted_exit_code;
  if (!clean) {
    spdlog::error("fault-free run: {}", describe(clean.error()));
    return 1;
  }
  auto faulty = run_side(topology, overrides,
                         with_link({"--local-nodes", "3", "--fault",
                                    "kind=kill_node,node=n2,at_step=" + std::to_string(kill_at)},
                                   r.link),
                         dir->path(), "faulty", r.interrupted);
  if (stop_requested(r.interrupted))
    return interrupted_exit_code;
  if (!faulty) {
    spdlog::error("run with the fault: {}", describe(faulty.error()));
    return 1;
  }
  bool same_weights = digests(*clean) == digests(*faulty) && !digests(*clean).empty();
  bool exactly_once = same_counts(*clean, *faulty);
  print_table(*clean, *faulty, same_weights, exactly_once);
  int code = same_weights && exactly_once && faulty->faults.size() == 1 ? 0 : 1;
  if (!r.json_out.empty()) {
    nlohmann::json out = {{"bench", "faults"},
                          {"samples", samples},
                          {"kill_at_step", kill_at},
                          {"clean_wall_seconds", clean->wall_seconds},
                          {"faulty_wall_seconds", faulty->wall_seconds},
                          {"faults", to_json(*faulty)["faults"]},
                          {"same_weights", same_weights},
                          {"exactly_once", exactly_once}};
    return bench_figures{r.json_out, std::move(out), "faults"}.finish(code, r.interrupted);
  }
  return code;
}

int bench_faults_command(args& a, const std::atomic<bool>* interrupted) {
  bench_faults_request r;
  int32_t step = 0;
  r.interrupted = interrupted;
  std::string v;
  bool read = read_flags(a, "baton bench faults", [&](const std::string& flag) {
    if (flag == "--quick")
      return r.quick = true;
    if (flag == "--json")
      return a.value(flag, r.json_out) && writable_output(flag, r.json_out);
    if (flag == "--kill-at")
      return a.value(flag, v) && parse_int(flag, v, step) && step >= 0 && (r.kill_at = v, true);
    if (flag == "--link")
      return a.value(flag, v) && parse_link(flag, v, r.link);
    return false;
  });
  // The step must come within the run: a kill after its end never happens,
  // found only after both runs.
  const int64_t steps = fault_bench_samples(r.quick) / fault_bench_minibatch;
  if (read && r.kill_at != "half" && step >= steps) {
    std::fprintf(stderr, "baton bench faults: --kill-at %d: the run has %lld steps (%s); give a "
                         "step from 0 to %lld\n",
                 step, static_cast<long long>(steps), r.quick ? "--quick" : "without --quick",
                 static_cast<long long>(steps - 1));
    return 2;
  }
  return read ? bench_faults(r) : 2;
}

} // namespace bench
} // namespace baton::apps
