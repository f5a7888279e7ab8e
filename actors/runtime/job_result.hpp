#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json_fwd.hpp>

#include "messages/types.hpp"
#include "model/core/specs.hpp"
#include "model/core/warm_up.hpp"

namespace baton::actors {
inline namespace runtime {

/// Everything a finished run reports: the metrics JSON and the results table.
/// A fault and what became of it (`faults:` in the metrics JSON).
struct fault_record {
  std::string kind;   ///< throw | kill_node | stop_node | actor_failed | node_lost | stalled
  std::string target; ///< actor or node
  int64_t at_step = -1;           ///< the job's step when it was injected or seen (-1: unknown)
  /// Detection latency: from the injection (a fault baton injected), from
  /// the node's last heartbeat (node_lost) or from the job's last advance
  /// (stalled) to the detection. -1: unknown, and left out of the metrics.
  int64_t detected_after_ms = -1;
  int64_t recovered_after_ms = -1; ///< detection to training again (-1: not recovered)
  int64_t restored_step = -1;     ///< the checkpoint step the job restarted from
};

/// A run stopped before its last epoch (runtime.stop_at_accuracy): the
/// epoch report that reached the accuracy.
struct early_stop {
  std::string actor;       ///< the head (result group) that reported it
  int32_t epoch = -1;      ///< from 0
  double test_accuracy = 0;
  double seconds = 0;      ///< into training, as the epoch's "seconds"
  /// What stopped it: stop_at_accuracy, early_stopping (every head went
  /// early_stopping.patience epochs without a higher validation accuracy),
  /// or stop_after_seconds (the time budget; `actor`, `epoch` and
  /// `test_accuracy` are then the last epoch reported before it, epoch -1
  /// when none was).
  std::string reason = "stop_at_accuracy";
  /// early_stopping: the best epoch of `actor` (from 0), its validation
  /// accuracy, and the patience spent.
  int32_t best_epoch = -1;
  double best_validation_accuracy = 0;
  int32_t patience = 0;
};

/// Training microbatches a trainable actor trained, and replays it dropped.
struct trained_count {
  int64_t trained = 0;
  int64_t duplicates = 0;
};

/// The training after its warm-up (model/core/warm_up.hpp's span): the
/// samples the result's first row trained from then to the end of that
/// epoch (its evaluation left out), and their seconds.
using steady_training = model::steady_span;

struct job_result {
  std::string job;  ///< `job:` of the topology that ran
  /// The strategy (job_plan::strategy): transfer | pipeline | data-parallel |
  /// ist | resist; "" = `job`.
  std::string mode;
  /// How it ran: actors (the coordinator's run) | local (`--mode local`, the
  /// one-process reference) | separate (`--baseline separate`).
  std::string run = "actors";
  /// What each entry of `heads` is (job_plan::result_label): head | stage | workers.
  std::string result_label = "head";
  std::string topology_file;
  double wall_seconds = 0;
  /// From the first training microbatch to the end: the wall without setup
  /// (connecting nodes, spawning actors, loading data and models).
  double train_seconds = 0;
  /// From the end of the warm-up (the first progress report; a local run's
  /// as many samples) to the end: what `baton bench` rates. Unset for a run
  /// too short to report progress, and for one restarted from a checkpoint.
  std::optional<steady_training> steady;
  std::vector<messages::actor_report> heads;  ///< in topology order
  std::vector<messages::node_report> nodes;
  std::vector<messages::actor_report> actors; ///< every actor, heads included
  /// Pipeline stages' final weights, in stage order (not in the metrics JSON);
  /// with saved_best, those of each result group's best epoch.
  std::vector<messages::tensor_set> stage_weights;
  /// By result group: its epoch of the highest validation accuracy (from 0;
  /// runs with data.validation only). The metrics write it as "best_epoch".
  std::map<std::string, int32_t> best_epochs;
  /// stage_weights are the best epochs' (save: best), not the final ones.
  bool saved_best = false;
  /// How the data's raw samples were normalised (kind, mean, std, where they
  /// came from): what an exported model applies to raw inputs. The metrics
  /// JSON writes it as "normalisation"; absent where it was not computed.
  std::optional<model::input_normalisation> normalisation;
  std::vector<fault_record> faults;               ///< injected and seen, in order
  int32_t restarts = 0;                           ///< restarts from checkpoints
  std::map<std::string, trained_count> trained;   ///< by trainable actor
  std::string checkpoint_dir;                     ///< where checkpoints went ("" none)
  /// Seconds into training when each head's (result group's) epoch report
  /// was complete, by head and epoch; the metrics JSON writes them as each
  /// epoch's "seconds" (runs of the actors only: --mode local has none).
  std::map<std::string, std::map<int32_t, double>> epoch_seconds;
  /// Bytes the members of each head (result group) sent in each epoch, by
  /// head and epoch (their edges' bytes between two epoch reports; after a
  /// restart, from the restart). The metrics JSON writes them as each
  /// epoch's "bytes_sent" (runs of the actors only).
  std::map<std::string, std::map<int32_t, int64_t>> epoch_bytes;
  /// Set when the run stopped at runtime.stop_at_accuracy; otherwise it ran
  /// every epoch.
  std::optional<early_stop> stopped;
  /// Set when the run failed but kept the work done (a node lost in a run
  /// that cannot recover, runtime/coordinator.cpp): what failed. The
  /// outputs are written and baton exits with code 2; the metrics JSON
  /// writes it as "failed".
  std::string failed;
  /// What the run's planning settled (job_plan::settled); the metrics JSON
  /// writes it as "settled" when not empty.
  std::vector<std::string> settled;
};

/// The steady training of the finished run `r`, where `actor` trained
/// `samples` of its own in `seconds` (progress_line::steady): the samples of
/// r's first row in the proportion `actor` trained. Unset after a restart,
/// or when `actor` trained nothing in it or fewer samples in all.
std::optional<steady_training> steady_of(const job_result& r, const std::string& actor,
                                         int64_t samples, double seconds);

/// The strategy `r` names: its mode, else its job.
std::string strategy_of(const job_result& r);

/// The result rows whose training loss was not finite in some epoch, each
/// with the first such epoch: "head 'a' from epoch 2, head 'b' from epoch
/// 3" ("'workers' from epoch 1" where the row is named as its kind); ""
/// when every loss was finite. Such a row's weights are NaN or inf
/// (a non-finite loss makes non-finite gradients), so the run failed
/// (issue 32 item 11: it ended with exit 0).
std::string non_finite_losses(const job_result& r);

/// The metrics JSON: job; mode (strategy_of); run; result_label; wall_seconds; train_seconds;
/// steady {samples, seconds} (when set); heads [{name, task, test_accuracy,
/// train_loss, samples, weights_digest, epochs [{epoch (from 1, as the log
/// numbers them), train_loss, test_accuracy, samples, seconds and
/// bytes_sent (when known)}]}]; nodes [{name,
/// peak_rss_bytes (the process's own peak, VmHWM), cpu_seconds (its CPU
/// during training: since the training started)}]; edges [{from, to, messages, bytes}];
/// actors [{name, role, node, busy_seconds, idle_seconds, bubble_seconds,
/// busy_fraction, idle_fraction, bubble_fraction}]: each fraction is its
/// seconds over busy + idle (0 when that is 0); bubble time is part of idle
/// time. Trace events are not written here (see actors/flow/trace.hpp). With
/// recovery: restarts, faults [{kind, target, at_step, detected_after_ms
/// (only when known), recovered_after_ms, restored_step}], trained {actor: {trained,
/// duplicates}}, checkpoint_dir. A run stopped at runtime.stop_at_accuracy:
/// stopped {actor, epoch (from 1), test_accuracy, seconds, reason}, by
/// early_stopping also {best_epoch, best_validation_accuracy, patience}.
/// settled: ["KEY=VALUE", ...] when the plan settled keys the topology left
/// open (job_plan::settled).
/// With validation samples: each epoch's and head's validation_accuracy,
/// each head's best_epoch (from 1); "saved": "best" when stage_weights are
/// the best epochs'.
nlohmann::json to_json(const job_result& r);

/// Reads a job result back from its metrics JSON (used by the baseline,
/// which collects one result per process).
caf::expected<job_result> job_result_from_json(const nlohmann::json& j);

/// Writes to_json(r) to `path` atomically.
caf::expected<void> write_metrics(const job_result& r, const std::string& path);

/// A plain-text table of the result groups (its first column named by
/// `result_label`) and the run's totals, the footer naming the strategy and
/// how it ran ("resist (actors): ...").
std::string results_table(const job_result& r);

/// Sum of peak RSS over the nodes (processes) of a run.
int64_t total_peak_rss(const job_result& r);

/// Sum of bytes over all edges of a run.
int64_t total_edge_bytes(const job_result& r);

} // namespace runtime
} // namespace baton::actors
