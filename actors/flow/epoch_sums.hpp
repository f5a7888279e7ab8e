#pragma once

// What a trainable actor computes its loss and accuracy from: the labels a
// microbatch carries for its task, and the running sums of one epoch.

#include <cstdint>
#include <string>

#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// Running sums of one epoch of a trainable actor that has a loss.
struct epoch_sums {
  double loss_sum = 0;  ///< sum over microbatches of mean loss * samples
  int64_t samples = 0;  ///< training samples
  int64_t correct = 0;  ///< correct predictions on the test split
  int64_t evaluated = 0;///< test samples evaluated
  int64_t validation_correct = 0; ///< correct predictions on the validation samples
  int64_t validated = 0;          ///< validation samples evaluated

  /// Counts `correct` right predictions of `batch` evaluated samples: of the
  /// validation samples when `validation`, else of the test split.
  void add_evaluation(bool validation, int64_t right, int64_t batch) {
    (validation ? validation_correct : correct) += right;
    (validation ? validated : evaluated) += batch;
  }

  /// The epoch's result (mean loss, accuracies: validation -1 when none was
  /// evaluated); the sums start over.
  messages::epoch_result close(int32_t epoch) {
    messages::epoch_result e{epoch, samples ? loss_sum / samples : 0.0,
                             evaluated ? static_cast<double>(correct) / evaluated : 0.0,
                             samples,
                             validated ? static_cast<double>(validation_correct) / validated
                                       : -1.0,
                             evaluated,
                             validated};
    *this = {};
    return e;
  }
};

/// The labels of task `task` in `m`, or nullptr when it carries none.
const at::Tensor* task_labels_of(const messages::microbatch& m, const std::string& task);

} // namespace flow
} // namespace baton::actors
