#pragma once

// What the actors of a pass report, gathered into a job's result: plain
// data (no actor system). The coordinator decides which messages count
// (those of the current pass) and hands them over; the collector merges the
// reports of each result group and orders everything by the plan.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

/// One report for the replicas of a stage: samples add up, the training loss
/// is the samples-weighted mean, and accuracy is replica 0's (evaluation
/// microbatches all go to replica 0), or, where the members counted the
/// samples they evaluated (data-parallel workers that split the test
/// batches), their correct predictions over those samples. Replicas end with the same weights; the
/// digest is replica 0's (each replica's own is in the actors list). Its
/// actor is the replicas' name without ".N". `reports` is not empty.
messages::actor_report merge_replica_reports(std::vector<messages::actor_report> reports);

/// The reports, weights and counts of one pass of a job.
class result_collector {
public:
  /// Collects for `plan`, which must outlive the collector.
  explicit result_collector(const job_plan& plan) : plan_(plan) {}

  /// An actor's final report: listed among the actors, and its group's
  /// result once every member of the group sent its own.
  void final_report(messages::actor_report report);
  /// An actor's report of one epoch, `seconds` into training: the report to
  /// show for its group (an actor in no group or a group of one: its own), or
  /// nothing while other members of the group have not sent that epoch yet.
  /// The group's epoch is stamped with the seconds of its last member's.
  std::optional<messages::actor_report> epoch_report(const messages::actor_report& report,
                                                     double seconds = 0);
  /// A stage's final weights (kind "weights"), by the actor that sent them.
  void weights(messages::tensor_set weights);
  /// A trainable actor's exactly-once counts.
  void trained(const std::string& actor, int64_t trained, int64_t duplicates);

  /// Forgets everything of the pass (a failed pass before a restart) but the
  /// epochs' times and bytes: an epoch trained again after a restart is
  /// stamped anew, its bytes counted from the restart.
  void clear();
  /// Moves what was collected into `result`: the actors' reports as they
  /// came, the trained counts, then the groups' results and the weights in
  /// plan order (a group where its first member is; a group whose final
  /// reports did not all come is its complete epochs, or left out when it
  /// has none), and the plan's names for them (job_result::mode, the
  /// strategy: the plan's, else `result.job`; result_label). The collector
  /// is empty after.
  void finish(job_result& result);

private:
  /// Adds `report` (a complete epoch of result group `group`) to the
  /// group's result so far: its epochs, their samples, the last one's loss
  /// and accuracy. Returns `report`.
  messages::actor_report so_far(const std::string& group, messages::actor_report report);
  /// The bytes `report`'s actor sent in its epoch (its edges count them
  /// over its life), for result group `group`.
  void count_epoch_bytes(const std::string& group, const messages::actor_report& report);

  const job_plan& plan_;
  std::vector<messages::actor_report> actors_; ///< final reports, as they came
  std::map<std::string, trained_count> trained_; ///< by trainable actor
  /// Epoch reports of a result group's members, until all came.
  std::map<std::pair<std::string, int32_t>, std::vector<messages::actor_report>> group_epochs_;
  std::map<std::string, std::vector<messages::actor_report>> group_finals_;
  std::map<std::string, messages::actor_report> results_; ///< by result group, when complete
  /// By result group: its complete epochs so far, the result of a group
  /// whose final reports do not all come.
  std::map<std::string, messages::actor_report> partial_results_;
  std::map<std::string, messages::tensor_set> weights_;   ///< by actor name
  std::map<std::string, std::map<int32_t, double>> epoch_seconds_; ///< by group, epoch
  /// Bytes each member of a group sent in an epoch, by group, epoch and
  /// member: an epoch trained again after a restart replaces its bytes.
  std::map<std::string, std::map<int32_t, std::map<std::string, int64_t>>> epoch_bytes_;
  /// Bytes each actor had sent at its last epoch report, in this pass.
  std::map<std::string, int64_t> bytes_sent_;
};

/// Logs a result group's complete epoch: its test (and validation) accuracy,
/// loss and samples; a loss that is not finite is warned about with
/// `advice` (job_plan::divergence_advice: the mode's own keys, "lower the
/// optimizer's lr or momentum" when empty).
void log_epoch(const std::string& group, const messages::epoch_result& e,
               const std::string& advice);

} // namespace runtime
} // namespace baton::actors
