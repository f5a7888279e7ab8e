#pragma once

// What the one-process runs share (the modes' `--mode local` references and
// pre-training): the machine's cores, the topology's data as its source
// reads it, and progress in the log.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/plan_checks.hpp" // cores()
#include "model/core/dataset.hpp"
#include "model/core/specs.hpp"
#include "model/core/warm_up.hpp"

namespace baton::actors {
inline namespace runtime {

/// The topology's training part, validation samples and test split, exactly
/// as its source reads them, with at most `train_limit` training samples (0:
/// all, validation included).
caf::expected<model::data_splits> load_data(const topology& t, int64_t train_limit);

/// Logs the progress of a one-process run every 5 s at most, as "WHAT NAME:
/// epoch E N samples, loss L".
model::progress_fn log_progress(const std::string& what);

/// When a one-process run's training began: the clock, and this process's
/// CPU seconds then (its report counts the CPU of training only).
struct training_start {
  std::chrono::steady_clock::time_point time;
  double cpu_seconds = 0;
};

/// Now, as a training_start.
training_start training_starts();

/// A one-process run's result before its reports: `t`'s job, run
/// "local", this process's usage as node `node` (its CPU seconds since
/// `training`), and the wall and training seconds from `started` and
/// `training` until now.
job_result local_result(const topology& t, const std::string& node,
                        std::chrono::steady_clock::time_point started,
                        const training_start& training);

/// The samples of the warm-up of a one-process run of `t`: as many steps of
/// `global_batch` samples as the actors' runs train before their first
/// progress report (runtime.progress_every).
int64_t warm_up_samples(const topology& t, int64_t global_batch);

/// Sets `out.steady` from a warm_up_watch's span (nothing when unset).
void set_steady(job_result& out, const std::optional<model::steady_span>& steady);

/// What a one-process run trained as one result reports of it, as the
/// actors' result group `group` (role `role`, training `task`) reports it:
/// node "local", `samples` and `digest`, one epoch per entry of `train_loss`
/// and `test_accuracy` (each an equal share of the samples), and the last
/// epoch's loss and accuracy; `validation_accuracy` has one entry per
/// epoch, or none without validation samples. (data-parallel's and IST's
/// `--mode local`.)
messages::actor_report local_group(const std::string& group, const std::string& role,
                                   const std::string& task, int64_t samples,
                                   const std::vector<double>& train_loss,
                                   const std::vector<double>& test_accuracy,
                                   const std::vector<double>& validation_accuracy,
                                   const std::string& digest);

/// The stop a one-process run that ended early by early_stopping made, as
/// the actors' run records it (run_stop over its results' epochs, with
/// `patience`); nullopt when none did.
std::optional<early_stop> early_stop_of(const job_result& out, int32_t patience);

/// Notes result group `group`'s best epoch (by validation accuracy; -1:
/// none judged) in out.best_epochs and, when the run `kept` its weights
/// (save: best) for --save-model in place of the final ones, out.saved_best.
void note_best_epoch(job_result& out, const std::string& group, int32_t best_epoch, bool kept);

} // namespace runtime
} // namespace baton::actors
