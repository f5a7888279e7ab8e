#pragma once

#include <ATen/core/Tensor.h>

#include "model/core/specs.hpp"

namespace baton::model {

/// Maps dataset labels (int64 [B]) to task labels (int64 [B]).
at::Tensor apply(const task& t, const at::Tensor& labels);

} // namespace baton::model
