#pragma once

// The best epoch of a run by validation accuracy, and whether the run has
// gone `patience` epochs without beating it (the workload's `save: best`
// and `early_stopping`, model::selection_spec). Plain data: the local
// references, the coordinator's stop (actors/runtime/run_stop.hpp) and the
// weights it keeps (actors/runtime/best_epochs.hpp) all judge epochs by it.

#include <cstdint>

namespace baton::model {

class epoch_selection {
public:
  /// `patience` 0: exhausted() is never true.
  explicit epoch_selection(int32_t patience = 0) : patience_(patience) {}

  /// Epoch `epoch` (from 0, after every earlier one) ended with validation
  /// accuracy `accuracy`: whether it is the best so far (strictly higher
  /// than each earlier epoch; the first always is).
  bool add(int32_t epoch, double accuracy);

  /// The best epoch so far; -1 before the first.
  int32_t best_epoch() const { return best_epoch_; }
  double best_accuracy() const { return best_accuracy_; }
  /// Epochs since the best one (0 right after it).
  int32_t epochs_since_best() const { return since_; }
  /// Whether `patience` epochs in a row have passed without a better one.
  bool exhausted() const { return patience_ > 0 && since_ >= patience_; }

private:
  int32_t patience_;
  int32_t best_epoch_ = -1;
  double best_accuracy_ = 0;
  int32_t since_ = 0;
};

} // namespace baton::model
