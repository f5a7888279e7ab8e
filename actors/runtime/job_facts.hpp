#pragma once

// What the runtime reads of a job besides its plan and its cluster: the
// names its messages and results carry, and the job's length (a fault at a
// step past its end never fires). Plain data: no CAF, no mode.

#include <cstdint>
#include <string>

#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace runtime {

/// The workload and strategy of a run, as far as the runtime reads them.
struct job_facts {
  std::string file;       ///< the topology file (or the built-in default's name), for messages
  std::string job;        ///< `job:`, for the result
  int32_t epochs = 1;     ///< data.epochs
  int64_t batch_size = 1; ///< data.batch_size: samples per step
  double target_accuracy = 0; ///< target_accuracy: stop once every result reaches it (0: never)
  /// save and early_stopping: keep each result's best epoch by validation
  /// accuracy, stop once every result went `patience` epochs without a better one.
  model::selection_spec selection;
};

/// The facts of `t`.
inline job_facts facts_of(const topology& t) {
  return {t.file, t.job, t.plan.epochs, t.plan.batch_size, t.target_accuracy, t.selection};
}

} // namespace runtime
} // namespace baton::actors
