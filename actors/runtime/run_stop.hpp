#pragma once

// When a run stops before its last epoch, as plain data: every head reached
// target_accuracy, every head went early_stopping.patience epochs without a
// higher validation accuracy, the time budget (runtime.stop_after_seconds) is spent, or
// a node is lost that the run cannot recover from (salvage: the actors on
// the other nodes stop to keep the work done). No actor system and no
// clock: the coordinator passes the time in, and does the logging and the
// sending (control shutdown to the actors the plan starts).
//
// Once stopping, a failure or a lost actor ends nothing (the actors that
// report are the result), and the actors that have not reported within a
// limit of the stop are given up.

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "actors/runtime/job_result.hpp"
#include "model/core/epoch_selection.hpp"

namespace baton::actors {
inline namespace runtime {

class run_stop {
public:
  using clock_type = std::chrono::steady_clock;

  /// `target_accuracy` 0, `budget_seconds` 0 and `patience` 0: none stops
  /// the run. `result_groups`: the heads that must each reach the target,
  /// or each spend their patience.
  run_stop(double target_accuracy, double budget_seconds, size_t result_groups,
           int32_t patience = 0);

  /// Head `head`'s epoch `epoch` (from 0) reached `test_accuracy` and
  /// `validation_accuracy` (-1: no validation samples), complete `seconds`
  /// into training: the stop to begin once every result group has reached
  /// target_accuracy (in this or an earlier epoch), or once every one has
  /// gone `patience` epochs without a higher validation accuracy
  /// (model::epoch_selection; reason "early_stopping"); none before, and
  /// none once stopping. An epoch reported again (a restart replays the
  /// steps after its checkpoint) is not judged again.
  std::optional<early_stop> epoch(const std::string& head, int32_t epoch, double test_accuracy,
                                  double seconds, double validation_accuracy = -1);
  /// `trained` seconds into training: the stop at the time budget, keeping
  /// the last epoch reported (epoch -1 when none was); none before the
  /// budget is spent, and none once stopping.
  std::optional<early_stop> time(double trained) const;

  /// The stop `at` (from epoch() or time()) begins at `now`.
  void begin(early_stop at, clock_type::time_point now);
  /// A lost node the run cannot recover from: stopping from `now` to keep
  /// the work of the other nodes.
  void salvage(clock_type::time_point now);

  /// A stop began (target or budget); what stopped the run.
  const std::optional<early_stop>& stopped() const { return stopped_; }
  bool salvaging() const { return salvaging_; }
  /// Stopped or salvaging: failures and lost actors end nothing.
  bool stopping() const { return stopped_.has_value() || salvaging_; }
  /// Whether `limit` has passed since the stop began (the actors that have
  /// not reported by then are left out).
  bool past(clock_type::duration limit, clock_type::time_point now) const;

private:
  double target_;
  double budget_;
  size_t groups_;
  int32_t patience_;
  std::set<std::string> reached_; ///< heads that reached the target
  std::map<std::string, model::epoch_selection> judged_; ///< by head: its validation epochs
  std::map<std::string, int32_t> last_judged_;           ///< by head: its last epoch judged
  /// The last epoch reported (what a stop at the time budget keeps).
  early_stop last_epoch_{"", -1, 0, 0, "stop_after_seconds"};
  std::optional<early_stop> stopped_;
  bool salvaging_ = false;
  clock_type::time_point began_;
};

/// Why the run stops, as its log says: "epoch 3 of all10 reached 85.10%
/// (target_accuracy 85.00%)", "epoch 6 of all10: 3 epochs without a higher
/// validation accuracy than epoch 3's 86.20% (early_stopping.patience 3)" or
/// "trained 12.0 s (runtime.stop_after_seconds)".
std::string stop_reason(const early_stop& at, double target_accuracy);

} // namespace runtime
} // namespace baton::actors
