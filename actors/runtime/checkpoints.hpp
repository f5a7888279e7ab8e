#pragma once

// Where a run's checkpoints go and which step it starts from: decided once,
// before the first actor is spawned, from the topology's runtime section and
// the run's options (--resume, a temporary directory); and what each pass
// tells its actors of them.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"
#include "actors/config/topology.hpp"
#include "actors/runtime/coordinator.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace runtime {

/// The checkpoint directory of a run and the step it starts from.
struct checkpoint_choice {
  /// The run's checkpoint directory ("" = none): --resume's, else
  /// runtime.checkpoint_dir, else (with checkpoints on) the temporary one.
  std::string dir;
  /// Checkpoints are written or resumed from: the run's result names `dir`
  /// (job_result::checkpoint_dir) and its run.yaml is there.
  bool kept = false;
  int32_t every = 0; ///< steps between checkpoints (runtime.checkpoint_every; 0: none)
  /// The step the pass starts from (0: the initial weights): --resume's for
  /// the first, the newest common checkpoint after a restart.
  int64_t restore_step = 0;
};

/// Chooses the checkpoint directory of running `plan` (made from `t`) with
/// `options`; when checkpoints are on, creates it and writes run.yaml there,
/// and with --resume finds the newest step every trainable actor has a valid
/// checkpoint of. Logs the choice. errc::bad_config when checkpoints are on
/// but no directory is set; errc::bad_file when --resume finds no common step.
caf::expected<checkpoint_choice> choose_checkpoints(const topology& t, const job_plan& plan,
                                                    const run_options& options);

/// What a pass adds to the settings of `a` (an actor of `plan`): the step
/// it restarts from and, if it is trainable, its checkpoints (a directory of
/// its own under `checkpoints.dir`) and faults (the step it throws at, armed
/// in `faults`; the last trainable actor reports the job's steps for node
/// faults and chaos). `trace`: it records its schedule.
run_settings run_settings_of(const planned_actor& a, const job_plan& plan,
                             const checkpoint_choice& checkpoints, fault_injector& faults,
                             bool trace);

} // namespace runtime
} // namespace baton::actors
