#include "actors/flow/epoch_sums.hpp"

namespace baton::actors {
inline namespace flow {

const at::Tensor* task_labels_of(const messages::microbatch& m, const std::string& task) {
  for (const auto& l : m.labels)
    if (l.task == task)
      return &l.values;
  return nullptr;
}

} // namespace flow
} // namespace baton::actors
