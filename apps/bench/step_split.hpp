#pragma once

// Where the step of a parallel bench side went (`baton bench pipeline` and
// `baton bench data-parallel`): compute, waiting, bubble, imbalance and the
// runtime's overhead, from the metrics the run wrote; and the cores' time
// that serialisation and the wire took.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/runtime/job_result.hpp"

namespace baton::apps {
inline namespace bench {

/// A parallel side's time, as fractions of its training time (so of its
/// mean step) averaged over its W compute actors (stages or workers); they
/// add up to 1. With the one-thread side's per-sample compute, `compute` is
/// its "of limit" plus what the parallel side's computations cost beyond
/// the one-thread side's (smaller batches, two cores sharing caches).
struct step_split {
  double compute = 0;   ///< computing: forward, backward, optimizer step (and a stage's evaluation)
  double waiting = 0;   ///< waiting for the gradient exchange, beyond the imbalance (workers)
  double bubble = 0;    ///< a stage idle with work in flight, beyond the imbalance (stages)
  double imbalance = 0; ///< the slowest actor's compute minus the mean: what the others wait for
  double overhead = 0;  ///< the rest: neither computing nor waiting (messages, copies, wire, CAF)
  /// The CPU of the actors' processes beyond their computations, over those
  /// computations (stages report it; -1: unknown).
  double cpu_beyond_compute = -1;
  /// The CPU every process of the run spent serialising the messages that
  /// crossed it (copies into and out of CAF's buffers and shared slabs
  /// included), and in the kernel's socket reads and writes, over the cores'
  /// time (the compute actors' lives added up): the runtime's share of the
  /// cores, which the columns above count as the computations' loss (slower
  /// compute), waiting or overhead. 0 when no message crossed a process.
  double serialisation = 0;
  double wire = 0;
  int32_t actors = 0; ///< the compute actors found (0: no split)
  bool stages = false; ///< a pipeline's stages (bubble), else data-parallel workers (waiting)

  /// {"compute": ..., "waiting": ..., "bubble": ..., "imbalance": ...,
  /// "overhead": ..., "serialisation": ..., "wire": ...,
  /// "cpu_beyond_compute": ... (when known)}.
  nlohmann::json to_json() const;
};

/// The split of a pipeline run, from its "pipeline_stage" actors: busy
/// seconds are compute, bubble seconds are waited.
step_split split_of_pipeline(const actors::job_result& r);

/// The split of a data-parallel run, from its "data_parallel_worker"
/// actors' figures: forward, backward, step and evaluate seconds are
/// compute, exchange_wait seconds are waited.
step_split split_of_data_parallel(const actors::job_result& r);

/// Where the cores' time of a side whose actors may outnumber the cores went
/// (`baton bench transfer`: backbone stages and K heads, each of up to the
/// cores' threads): fractions of the cores' time, the cores x the training
/// time.
struct core_split {
  double used = -1;         ///< CPU of the run's processes while training (-1: unknown)
  double serialisation = 0; ///< of it, serialising the messages that crossed a process
  double wire = 0;          ///< of it, the kernel's socket reads and writes
  /// Each backbone stage's and head's busy time over the training time.
  std::vector<std::pair<std::string, double>> busy;

  /// {"cores_used": ..., "cores_idle": ..., "serialisation": ..., "wire": ...,
  /// "busy": {actor: fraction}}; {} when unknown.
  nlohmann::json to_json() const;
  /// "cores used 91.5% (idle 8.5%), of them ser/copies 0.0%, wire 0.0%; busy:
  /// stage0 91%, h1 30%, ..."; "no figures ..." when unknown.
  std::string text() const;
};

/// The split of a transfer run over `cores` cores, from its nodes' CPU
/// while training and its "stage" and "head" actors.
core_split split_of_transfer(const actors::job_result& r, int32_t cores);

/// The header of a table of splits, its first column `width` wide.
std::string split_header(int width);

/// One row of that table: `label`, then the fractions ("-" for the ones the
/// strategy has none of).
std::string split_row(const std::string& label, int width, const step_split& s);

/// The legend of those columns, one line each.
const char* split_legend();

} // namespace bench
} // namespace baton::apps
