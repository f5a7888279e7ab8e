#pragma once

// What a one-process reference keeps of its epochs under the workload's
// `save` and `early_stopping` (model::selection_spec): each epoch judged by
// its validation accuracy (epoch_selection.hpp), the best one's weights
// when `save: best`, and whether the run stops. The actors' runs keep them
// in the coordinator instead (actors/runtime/best_epochs.hpp), by the same
// rule, so that both save the same epoch.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/epoch_selection.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

class best_weights {
public:
  explicit best_weights(const selection_spec& spec)
      : keep_(spec.keep_best), selection_(spec.patience) {}

  /// Epoch `epoch` ended with `validation_accuracy` (< 0: the run holds out
  /// no validation samples, and nothing is judged) and weights `state`
  /// (layered_model::state()): cloned when it is the best epoch so far and
  /// the spec keeps the best. Returns whether it is the best so far.
  bool epoch_end(int32_t epoch, double validation_accuracy, const std::vector<at::Tensor>& state);

  /// Whether the run stops here: early_stopping's patience is spent.
  bool stop() const { return selection_.exhausted(); }
  /// The best epoch so far (-1: none judged).
  int32_t best_epoch() const { return selection_.best_epoch(); }
  /// The best epoch's weights; empty unless the spec keeps them.
  const std::vector<at::Tensor>& weights() const { return weights_; }

private:
  bool keep_;
  epoch_selection selection_;
  std::vector<at::Tensor> weights_;
};

} // namespace baton::model
