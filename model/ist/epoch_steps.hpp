#pragma once

// The local steps and rounds of an IST epoch, plain numbers free of tensors,
// so that a strategy's section counts them without LibTorch
// (actors/modes/ist/section.cpp). The rest of IST's numerics is ist.hpp.

#include <cstdint>

#include "model/core/specs.hpp"

namespace baton::model::ist {

/// Local steps per worker per epoch: floor(floor(n / batch_size) / W), as
/// the authors' loop (len(train_loader) // world_size). Throws model::error
/// when it is 0 or an argument is not positive, or batch_size < 2 (batch
/// statistics of one sample).
int64_t steps_per_epoch(int64_t dataset_size, int64_t batch_size, int32_t workers);

/// Rounds per epoch: ceil(steps_per_epoch / local_steps).
int64_t rounds_per_epoch(int64_t steps_per_epoch, int32_t local_steps);

/// Where a round's local steps lie in the run, for the optimizer's schedule
/// (model::lr_at): the run's step of the round's first minibatch, the steps
/// per epoch and the epochs. per_epoch 0: a constant lr.
struct round_steps {
  int64_t first = 0;
  int64_t per_epoch = 0;
  int64_t epochs = 0;
};

/// The round_steps of round `round`, numbered over the run as the epochs
/// number them (epoch x rounds_per_epoch + the round within it).
round_steps steps_of_round(int64_t round, int64_t steps_per_epoch, int32_t local_steps,
                           int64_t epochs);

/// Where round `round` lies for `optimizer`'s schedule (none for a constant
/// lr), in a run of `epochs` epochs of `train_size` samples, `batch_size` per
/// worker step over `workers`, `local_steps` a round: the workers' and the
/// local references' one count.
round_steps schedule_of(const optimizer_spec& optimizer, int64_t round, int64_t train_size,
                        int64_t batch_size, int32_t workers, int32_t local_steps,
                        int64_t epochs);

} // namespace baton::model::ist
