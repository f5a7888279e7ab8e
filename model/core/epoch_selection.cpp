#include "model/core/epoch_selection.hpp"

namespace baton::model {

bool epoch_selection::add(int32_t epoch, double accuracy) {
  if (best_epoch_ >= 0 && !(accuracy > best_accuracy_)) {
    ++since_;
    return false;
  }
  best_epoch_ = epoch;
  best_accuracy_ = accuracy;
  since_ = 0;
  return true;
}

} // namespace baton::model
