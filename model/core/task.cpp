#include "model/core/task.hpp"

#include <torch/torch.h>

#include "model/core/error.hpp"

namespace baton::model {

at::Tensor apply(const task& t, const at::Tensor& labels) {
  if (labels.numel() > 0) {
    const int64_t low = labels.min().item<int64_t>();
    const int64_t high = labels.max().item<int64_t>();
    if (low < 0 || high >= static_cast<int64_t>(t.label_map.size()))
      throw error("task '" + t.name + "': dataset label " +
                  std::to_string(low < 0 ? low : high) + " out of range, expected 0.." +
                  std::to_string(static_cast<int64_t>(t.label_map.size()) - 1));
  }
  auto map = torch::tensor(t.label_map, torch::kInt64);
  return map.index_select(0, labels.to(torch::kInt64).reshape({-1})).view(labels.sizes());
}

} // namespace baton::model
