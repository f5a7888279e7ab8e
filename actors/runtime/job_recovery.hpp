#pragma once

// A run's recovery as plain data (no actor system, no clock: the
// coordinator passes the time in, stops the pass and starts the next): the
// faults the topology injects, the checkpoint directory and the step a pass
// starts from, what failed, whether a restart may cure it, and the record
// of each fault from its detection to training again
// (docs/faults-and-recovery.md).
//
//   prepare -> [pass] -> failed -> restart_refused? -> (pass stopped) ->
//   restart_from(newest common step) -> resumed (the record) -> [pass] ...

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/coordinator.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/liveness.hpp"

namespace baton::actors {
inline namespace runtime {

class job_recovery {
public:
  using clock_type = std::chrono::steady_clock;

  /// The recovery of a run on cluster `c` (its runtime section and faults).
  explicit job_recovery(const cluster& c);

  /// Checks the faults against the nodes (`live_nodes`; `embedded`: the job
  /// has none), chooses the checkpoint directory and, with --resume, the
  /// step to continue from (choose_checkpoints).
  caf::error prepare(const std::vector<std::string>& live_nodes, bool embedded,
                     const job_plan& plan, const run_options& options);

  fault_injector& faults() { return faults_; }
  const checkpoint_choice& checkpoints() const { return checkpoints_; }

  /// A pass begins: nothing of it has failed.
  void pass_started() { recoverable_ = false; }
  /// Records a failure (`kind`: actor_failed, actor_down, node_lost,
  /// stalled) of `target`, and returns `err`; recoverable when the topology
  /// recovers.
  caf::error failed(const std::string& kind, const std::string& target, caf::error err);
  bool recoverable() const { return recoverable_; }

  /// Before the failed pass is stopped: the error that ends the run
  /// instead of a restart, or none. An error of an actor that no injected
  /// fault explains, at the same step of the same actor as one before a
  /// restart (the actor's last heartbeat's step in `live`, or the pass's
  /// restore step), ends it (recurring_failure), as do `restarts` that
  /// reached runtime.max_restarts.
  caf::error restart_refused(const caf::error& failure, const liveness& live,
                             int32_t restarts);
  /// The pass is stopped and the job restarts from `step` (every trainable
  /// actor's newest common checkpoint): the fault's record opens, detected
  /// at `detected` (its latency from `live`).
  void restart_from(int64_t step, const liveness& live, clock_type::time_point detected);
  /// The actors of the new pass are wired at `now`, about to start: the
  /// record of the fault recovered from, once (none on a first pass).
  std::optional<fault_record> resumed(clock_type::time_point now);

  /// The warnings, once per run, for faults at a step past the job's end
  /// (the source's `samples` over all epochs, known when it starts; the
  /// parser refuses them when it knows the length).
  std::vector<std::string> unreachable_faults(int64_t samples, int32_t epochs,
                                              int64_t batch_size);

private:
  runtime_spec runtime_;
  std::vector<fault_spec> specs_;
  bool recovers_;
  fault_injector faults_;
  checkpoint_choice checkpoints_; ///< restore_step: the step the pass starts from
  bool recoverable_ = false;
  bool length_checked_ = false;
  std::string failure_kind_, failure_target_;
  std::optional<fault_record> open_fault_;
  clock_type::time_point detected_at_;
};

} // namespace runtime
} // namespace baton::actors
