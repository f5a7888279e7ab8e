#pragma once

// The local steps and rounds of an IST epoch, plain numbers free of tensors,
// so that a strategy's section counts them without LibTorch
// (actors/modes/ist/section.cpp). The rest of IST's numerics is ist.hpp.

#include <cstdint>

namespace baton::model::ist {

/// Local steps per worker per epoch: floor(floor(n / batch_size) / W), as
/// the authors' loop (len(train_loader) // world_size). Throws model::error
/// when it is 0 or an argument is not positive, or batch_size < 2 (batch
/// statistics of one sample).
int64_t steps_per_epoch(int64_t dataset_size, int64_t batch_size, int32_t workers);

/// Rounds per epoch: ceil(steps_per_epoch / local_steps).
int64_t rounds_per_epoch(int64_t steps_per_epoch, int32_t local_steps);

} // namespace baton::model::ist
