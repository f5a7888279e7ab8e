#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/roles/role_type.hpp"
#include "actors/runtime/job_facts.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/run_record.hpp"

namespace baton::actors {
inline namespace runtime {

/// How the coordinator runs a job.
struct run_options {
  bool progress_tty = false;  ///< redraw a progress line on the terminal
  /// A run with no message from any actor for this long is declared stuck.
  std::chrono::seconds stall_timeout{300};
  /// Set (by a signal handler) to abort the run cleanly.
  const std::atomic<bool>* interrupted = nullptr;
  bool trace = false;         ///< pipeline stages record their schedule (--trace)
  /// The actors that send weights send them after every epoch too, and the
  /// run saves each result's best epoch (--save-model with save: best,
  /// best_epochs.hpp).
  bool epoch_weights = false;
  /// --resume DIR: continue from the newest step every trainable actor has a
  /// checkpoint of in DIR (a run whose coordinator was killed).
  std::string resume_dir;
  /// A directory baton made for this run's checkpoints (the topology names
  /// none): used when checkpoints are on and runtime.checkpoint_dir is empty,
  /// and removed by its owner after the run and its nodes have stopped.
  std::string temporary_checkpoint_dir;
  /// The topology and `--set` options of this run, written as run.yaml into
  /// the checkpoint directory (what --resume DIR reads).
  run_record record;
  /// What the embedded process may spawn (a job without nodes).
  std::vector<role_type> roles;
};

/// Runs `plan` (made by the job's mode, placed on the nodes of `c`): connects
/// to the nodes of `c` (or spawns everything in this process when it has
/// none), spawns the plan's actors in order, introduces its edges in order,
/// starts its sources, monitors every actor, collects reports (one result
/// per result group) and weights, rolls the job back to the newest common
/// checkpoint when an actor or node fails (while `c`'s runtime allows), and
/// shuts every actor down when the run ends, fails or is interrupted. It
/// knows no training mode; of the workload it reads `facts` only.
///
///   connect nodes -> prepare_recovery -> spawn_all -> wire -> arm faults -> train -> collect
///                                           ^                                  |
///                                           +--- recover (restart pass) <------+ (a failure)
///   any error: shutdown
///
/// The parts are its own units: job_nodes (the spawners, lost nodes),
/// job_pass (the actors of a pass), result_collector (their reports),
/// checkpoints.hpp and fault_injector (recovery as plain data).
caf::expected<job_result> run_actor_job(caf::actor_system& sys, const cluster& c,
                                        const job_facts& facts, const job_plan& plan,
                                        const run_options& options);

} // namespace runtime
} // namespace baton::actors
