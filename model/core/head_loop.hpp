#pragma once

// The one-process loop that trains heads on a frozen backbone's features:
// every microbatch is forwarded through the backbone once and given to every
// head. Transfer's `--mode local` reference (model/transfer/reference.hpp)
// and pre-training (pretrain.hpp) both run it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/core/dataset.hpp"
#include "model/core/feature_cache.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"
#include "model/core/training.hpp"

namespace baton::model {

/// Results of one head.
struct head_result {
  std::string name;
  std::string task;
  std::vector<double> train_loss;    ///< per epoch
  std::vector<double> test_accuracy; ///< per epoch
  /// Per epoch, on the validation samples (empty without them).
  std::vector<double> validation_accuracy;
  int64_t samples = 0;               ///< training samples seen
  std::string weights_digest;        ///< of the final weights
  /// The trained head's layered_model::state() (weights, then buffers), as
  /// its actor sends it at the end: what `--save-model` writes (with
  /// save: best, those of best_epoch).
  std::vector<at::Tensor> weights;
  int32_t best_epoch = -1;           ///< by validation accuracy (-1: none)
};

/// One head's trainer and running statistics. `spec` must outlive it.
struct head_run {
  head_run(const head_spec& s, layered_model m);
  const head_spec& spec;
  head_trainer trainer;
  head_result result;
  double epoch_loss = 0;      ///< sum of microbatch mean loss x samples
  int64_t epoch_samples = 0;
  double recent_loss = 0;     ///< the same since the last progress report
  int64_t recent_samples = 0;
};

/// One training epoch of `train` as `plan` cuts it (augmented as
/// gather_training says): each microbatch goes
/// through `backbone` once and its features to every head in turn; appends
/// each head's mean loss to its result and reports progress every 20 steps.
void train_heads(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
                 const dataset& train, const batch_plan& plan, int32_t epoch,
                 const progress_fn& progress);

/// Every head's accuracy on `data` (in batches of `batch_size`, on the
/// backbone's features, whose cache keys sample i as evaluation sample
/// `first_id` + i: the validation samples count on from the test split's,
/// as the source numbers them), one per run.
std::vector<double> head_accuracies(frozen_backbone& backbone,
                                    std::vector<std::unique_ptr<head_run>>& runs,
                                    const dataset& data, int64_t batch_size,
                                    int64_t first_id = 0);

/// Appends every head's accuracy on `test` (head_accuracies) to its result.
void evaluate_heads(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
                    const dataset& test, int64_t batch_size);

} // namespace baton::model
