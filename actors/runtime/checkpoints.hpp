#pragma once

// Where a run's checkpoints go and which step it starts from: decided once,
// before the first actor is spawned, from the topology's runtime section and
// the run's options (--resume, a temporary directory); and what each pass
// tells its actors of them.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "actors/config/topology.hpp"
#include "actors/runtime/coordinator.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/run_record.hpp"

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
  /// The run the checkpoints belong to (run_record::run_id): written into
  /// each, and a checkpoint of another run is never restored.
  std::string run_id;
};

/// A run's hold on its checkpoint directory: an flock(2) on DIR/run.lock,
/// which holds "pid P host H run ID" of the holder. The kernel drops it when
/// the process ends, however it ends: a SIGKILLed run leaves nothing stuck,
/// and its `--resume` takes the directory again. Not inherited across exec.
/// A run.lock that is a symbolic link (or not a regular file) is refused,
/// never opened through (model::open_for_writing).
class checkpoint_lock {
public:
  /// Locks `dir` (which exists) for run `run_id`; errc::bad_config naming
  /// the directory and the holder when a live run holds it.
  static caf::expected<checkpoint_lock> take(const std::string& dir, const std::string& run_id);

  checkpoint_lock(checkpoint_lock&& other) noexcept;
  checkpoint_lock& operator=(checkpoint_lock&& other) noexcept;
  checkpoint_lock(const checkpoint_lock&) = delete;
  checkpoint_lock& operator=(const checkpoint_lock&) = delete;
  ~checkpoint_lock();

private:
  explicit checkpoint_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// The lock file of a checkpoint directory.
std::string lock_path(const std::string& dir);

/// Makes `dir` the checkpoint directory of run `record`, before anything
/// runs: creates it and locks it (checkpoint_lock). `resuming` (--resume
/// DIR): refused when the record there says the run finished (nothing to
/// resume; where its metrics and model are). A new run: refused when DIR
/// holds checkpoints of a run that did not finish (it can be resumed); the
/// checkpoints of a finished run are removed. Errors are errc::bad_config.
caf::expected<checkpoint_lock> claim_checkpoint_dir(const std::string& dir,
                                                    const run_record& record, bool resuming);

/// The names of the subdirectories of `dir` that hold checkpoint files
/// (step-N.ckpt): the trainable actors of the run that wrote them.
std::vector<std::string> checkpointed_actors(const std::string& dir);

/// The newest step every one of `trainable` has a valid checkpoint of in
/// `choice.dir` (0: none, or no directory), each checked to belong to run
/// choice.run_id: errc::bad_file naming the file and both run ids when one
/// is another run's, or when it cannot be read.
caf::expected<int64_t> newest_own_step(const checkpoint_choice& choice,
                                       const std::vector<std::string>& trainable);

/// Chooses the checkpoint directory of running `plan` under `limits` (the
/// cluster's runtime section) with `options`; when checkpoints are on, creates it and writes run.yaml there,
/// and with --resume finds the newest step every trainable actor has a valid
/// checkpoint of (newest_own_step). The run id is the record's (a new one
/// when it has none). Logs the choice. errc::bad_config when checkpoints are
/// on but no directory is set; errc::bad_file when --resume finds no common
/// step or one of another run.
caf::expected<checkpoint_choice> choose_checkpoints(const runtime_spec& limits,
                                                    const job_plan& plan,
                                                    const run_options& options);

/// What a pass adds to the settings of `a` (an actor of `plan`): the step
/// it restarts from and, if it is trainable, its checkpoints (a directory of
/// its own under `checkpoints.dir`) and faults (the step it throws at, armed
/// in `faults`; the last trainable actor reports the job's steps for node
/// faults and chaos). `trace`: it records its schedule.
run_settings run_settings_of(const planned_actor& a, const job_plan& plan,
                             const checkpoint_choice& checkpoints, fault_injector& faults,
                             bool trace);

/// Whether `run_dir` holds a valid checkpoint of any actor
/// (DIR/ACTOR/step-N.ckpt): what a directory --resume can continue needs.
bool holds_checkpoints(const std::string& run_dir);

/// Steps of which every one of `actors` has a valid checkpoint under
/// `run_dir` (0, the initial weights, is always one), descending.
std::vector<int64_t> common_checkpoint_steps(const std::string& run_dir,
                                             const std::vector<std::string>& actors);

} // namespace runtime
} // namespace baton::actors
