#pragma once

// The schedule of a run for `--trace`: each actor records what it did and when
// (trace_recorder), sends the events in its actor_report, and the coordinator
// writes all of them as one Chrome trace (write_chrome_trace), which
// chrome://tracing and https://ui.perfetto.dev show as one row per actor,
// grouped by node. Plain data, no CAF actors.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <nlohmann/json_fwd.hpp>

#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// Records the trace events of one actor. Takes steady-clock time points (the
/// ones activity uses) and stores system-clock microseconds: the offset
/// between the two clocks is taken once, at construction, so that events of
/// one actor never go backwards when the system clock is adjusted. Not
/// thread-safe: one recorder per actor.
class trace_recorder {
public:
  using clock = std::chrono::steady_clock;

  /// Events kept at most (56 bytes each on the wire): beyond this, record()
  /// counts them as dropped, so that a long run's report stays under the
  /// 64 MiB message limit instead of being refused as a whole.
  static constexpr size_t default_max_events = 1000000;

  /// A recorder that keeps events only when `enabled`.
  explicit trace_recorder(bool enabled, size_t max_events = default_max_events);

  /// True when record() keeps events (callers may skip taking time points).
  bool enabled() const { return enabled_; }

  /// Appends one event: `kind` (forward, backward, step, send, wait, eval,
  /// allreduce) ran from `start` to `end` on microbatch `microbatch_id` (-1:
  /// none) with weight version `weight_version` (-1: none). Does nothing
  /// when disabled. A negative duration is recorded as 0.
  void record(std::string kind, clock::time_point start, clock::time_point end,
              int64_t microbatch_id, int64_t weight_version);

  /// The events recorded since the last take(), in recording order; the
  /// recorder keeps none of them.
  std::vector<messages::trace_event> take();

  /// Events refused since construction because max_events were kept.
  int64_t dropped() const { return dropped_; }

private:
  bool enabled_;
  size_t max_events_;
  /// System-clock time minus steady-clock time, at construction.
  clock::duration to_system_;
  std::vector<messages::trace_event> events_;
  int64_t dropped_ = 0;
};

/// The Chrome trace ("JSON object format") of `actors`' trace events:
/// {"traceEvents": [...], "displayTimeUnit": "ms"} with one complete event
/// ("ph": "X") per trace event, sorted by start; ts and dur in microseconds,
/// ts relative to the earliest event of all actors; one pid per node (in
/// order of first appearance, named by "process_name" metadata), one tid per
/// actor (named by "thread_name" metadata, in the order of `actors`); args
/// {"microbatch", "version"}, -1 meaning none.
nlohmann::json chrome_trace(const std::vector<messages::actor_report>& actors);

/// Writes chrome_trace(actors) to `path` atomically (a temporary file next to
/// it, then a rename). Fails with bad_file, naming the file and the reason.
caf::error write_chrome_trace(const std::string& path,
                              const std::vector<messages::actor_report>& actors);

} // namespace flow
} // namespace baton::actors
