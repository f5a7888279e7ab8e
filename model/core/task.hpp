#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace baton::model {

/// A task: a label map over the dataset's classes.
struct task {
  std::string name;
  std::vector<int64_t> label_map; ///< label_map[dataset class] = task class
  int64_t classes = 0;            ///< 1 + max(label_map)
};

/// Builds a task, validating the map (non-empty, values from 0 to its
/// length - 1: a task has at most as many classes as the dataset). Throws
/// model::error otherwise.
task make_task(std::string name, std::vector<int64_t> label_map);

/// Maps dataset labels (int64 [B]) to task labels (int64 [B]).
at::Tensor apply(const task& t, const at::Tensor& labels);

} // namespace baton::model
