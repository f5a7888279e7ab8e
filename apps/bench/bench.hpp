#pragma once

// The `baton bench` commands, and what they share.

#include <atomic>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/runtime/job_result.hpp"

namespace baton::apps {
inline namespace bench {

using namespace baton::actors;


/// Runs `baton run [topology] --set overrides... flags... --metrics-out` as
/// its own process (so that its peak memory and CPU time are its own), logs
/// to dir/label.log and returns its metrics. An empty `topology` is the
/// built-in default.
/// `flags` with `--link LINK` added when `link` is not empty.
std::vector<std::string> with_link(std::vector<std::string> flags, const std::string& link);

caf::expected<job_result> run_side(const std::string& topology,
                                   const std::vector<std::string>& overrides,
                                   std::vector<std::string> flags, const std::string& dir,
                                   const std::string& label, const std::atomic<bool>* interrupted);

/// `baton bench transfer` options.
struct bench_request {
  int32_t heads = 3;
  bool quick = false;
  std::string json_out;
  std::vector<std::string> backbones{"convnet", "convnet_wide"};
  std::vector<std::string> overrides;
  int32_t local_nodes = 0; ///< run the shared side over N local node processes
  std::string link;        ///< --link RATE[,DELAY] for those nodes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// Runs the shared-backbone job and the separate baseline, one after the
/// other, for each backbone; prints wall times, ratios, peak memory and bytes
/// between actors; writes the figures to json_out if set. Returns the exit code.
int bench_transfer(const bench_request& r);

/// `baton bench pipeline` options.
struct bench_pipeline_request {
  bool quick = false;
  std::string json_out;
  std::vector<std::string> models{"convnet", "resnet18"};
  std::vector<std::string> schedules{"gpipe", "1f1b-flush", "1f1b"};
  int32_t repeat = 1; ///< runs per side, interleaved; the median is shown
  std::string link;   ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// For each model: profiles it, plans 2 stages (`baton plan --straight`),
/// then runs (a) the local loop with one compute thread and (b) the 2-stage
/// pipeline over two node processes with one compute thread each, under each
/// schedule; prints samples/s, the ratio to (a), per-stage utilisation, the
/// measured bubble fraction next to gpipe's theoretical one, the actor and
/// wire overhead (CPU beyond the stages' computations) and the extra CPU of
/// all processes. Returns the exit code.
int bench_pipeline(const bench_pipeline_request& r);

/// `baton bench faults` options.
struct bench_faults_request {
  bool quick = false;
  std::string json_out;
  std::string kill_at = "half"; ///< step of the SIGKILL: "half" of the run, or a number
  std::string link;             ///< --link RATE[,DELAY] for the node processes (empty: loopback)
  const std::atomic<bool>* interrupted = nullptr;
};

/// Runs the same short gpipe pipeline over 3 local node processes twice,
/// fault-free and with the node of stage 0 SIGKILLed mid-run; prints both
/// wall times, detection and recovery times, the step restored and whether
/// the final weights and exactly-once counts match. Returns the exit code.
int bench_faults(const bench_faults_request& r);

} // namespace bench
} // namespace baton::apps
