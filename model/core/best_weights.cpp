#include "model/core/best_weights.hpp"

namespace baton::model {

bool best_weights::epoch_end(int32_t epoch, double validation_accuracy,
                             const std::vector<at::Tensor>& state) {
  if (validation_accuracy < 0 || !selection_.add(epoch, validation_accuracy))
    return false;
  if (keep_) {
    weights_.clear();
    for (const auto& t : state)
      weights_.push_back(t.detach().clone());
  }
  return true;
}

} // namespace baton::model
