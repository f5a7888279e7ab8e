#pragma once

// What the simulation cannot read from a plan, the actor runtime's own cost
// of a message (model::cost::runtime_costs), measured once per machine with
// the runtime itself: a real `baton node` on 127.0.0.1 and this process's
// actor system, against the loopback's raw sockets measured beside it
// (link_calibration.hpp). docs/cost-model.md ("The runtime's own cost").

#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "apps/predict/link_calibration.hpp"
#include "model/cost/cost_model.hpp"
#include "model/cost/simulator.hpp"

namespace baton::apps {

/// The runtime's costs as measured.
struct runtime_calibration {
  model::cost::runtime_costs costs;
  std::string machine;        ///< the CPU and its cores (the file is this machine's only)
  std::string method;         ///< how, in words
  double local_round_trip = 0;  ///< two actors of one process, median seconds
  double remote_round_trip = 0; ///< a bare message to a node's pulse and back
  /// Each size's one-way time: the median round trip of a tensor of `bytes`
  /// to a node's pulse less half the bare one (its answer is bare).
  std::vector<link_sample> samples;
  /// Each size's CPU seconds per round trip, this process's and the node's
  /// (every thread of both: the runtime's I/O and the kernel's socket copies).
  std::vector<link_sample> cpu_samples;
  std::string cache_file;     ///< where it is kept ("" when not)
  bool cached = false;        ///< read from cache_file, not measured now
};

/// {message_seconds, remote_message_seconds, byte_seconds, io_byte_seconds,
/// colocation, machine, method, local_round_trip, remote_round_trip, samples,
/// cpu_samples}: the cache file and the predictions' "runtime".
nlohmann::json to_json(const runtime_calibration& c);

/// This machine as the kept file names it: the CPU's model and its cores.
std::string machine_text();

/// The costs from the round trips and the loopback's socket link beside
/// them, each per end of a message (the simulation charges a message's
/// cost at its sender and again at its receiver):
/// - message_seconds = local_round_trip / 4 (two messages, two ends each);
/// - remote_message_seconds = (remote_round_trip / 2 - socket a) / 2 -
///   message_seconds, socket a = latency + message_overhead;
/// - byte_seconds = (the sized one-way times' least-squares slope - 1 /
///   socket bandwidth) / 2;
/// - io_byte_seconds = the least-squares slope of `cpu_samples` (both ends'
///   CPU per trip over its bytes) / 2 - byte_seconds: what a byte costs the
///   cores at each end beyond what the actors wait for (none without
///   `cpu_samples`).
/// Each at least 0; colocation 0 (the profile is taken with as many copies
/// side by side as compute at once, predict.cpp's measured_rows; a
/// pipeline's rows set the workload's own: alone_with_colocation).
model::cost::runtime_costs runtime_costs_of(double local_round_trip, double remote_round_trip,
                                            const std::vector<link_sample>& samples,
                                            const model::cost::link_model& loopback,
                                            const std::vector<link_sample>& cpu_samples = {});

/// The runtime's costs, read from `cache_dir`/runtime.json when it is there
/// and names this machine, else measured and written there (`cache_dir`
/// "": not kept). `loopback` is the loopback's socket link
/// (calibrate_link("loopback", ...)).
///
/// How: a `baton node` is started on 127.0.0.1 (no shared memory, as
/// between hosts); this process's actor system asks its spawner for the
/// pulse actor. An event-based actor here sends it 400 bare messages, each
/// after the last one's answer, then tensors of 64 kB to 4 MB (9 each,
/// both processes' CPU read around each size's trips); and 4000 bare
/// messages to a pulse actor of this process. Medians of the round trips
/// after the first few (runtime_costs_of). About 2 s.
caf::expected<runtime_calibration> calibrate_runtime(const model::cost::link_model& loopback,
                                                     const std::string& cache_dir);

} // namespace baton::apps
