#pragma once

// How an epoch's samples are shared among W data-parallel workers, as
// DistributedSampler shares them: plain numbers, free of tensors, so that a
// strategy's section can count the steps of an epoch without LibTorch
// (actors/modes/data_parallel/section.cpp). The rest of the mode's numerics
// is data_parallel.hpp.

#include <cstdint>
#include <vector>

namespace baton::model {

/// What happens to the samples of an epoch that do not divide evenly among
/// the W workers. `pad` is DistributedSampler's default (drop_last=False):
/// the order is extended by repeating its start until its length is a
/// multiple of W, so a few samples are trained twice in that epoch. `drop`
/// is drop_last=True: the order's last n % W samples are not trained in that
/// epoch (a different few each epoch, the order being reshuffled).
enum class remainder_policy { pad, drop };

/// Worker `worker`'s share of epoch `epoch`, as DistributedSampler cuts it:
/// the seeded order (epoch_order(n, seed, epoch), the order plan_epoch uses)
/// after the remainder policy, then every W-th sample from position `worker`
/// (rank, rank + W, rank + 2W, ...). The W shares are equal in size and, with
/// `drop` (or when W divides n), disjoint. Throws model::error unless
/// 0 <= worker < workers.
std::vector<int64_t> worker_share(int64_t dataset_size, uint64_t seed, int32_t epoch,
                                  int32_t worker, int32_t workers, remainder_policy remainder);

/// A share cut into minibatches of `batch_size` (a worker's samples per
/// step); a last partial minibatch is kept, as plan_epoch keeps it. All
/// workers' shares have the same size, so they take the same number of
/// steps, and step k's global minibatch is the W workers' k-th minibatches
/// (W x batch_size samples).
std::vector<std::vector<int64_t>> worker_minibatches(const std::vector<int64_t>& share,
                                                     int64_t batch_size);

/// Steps per epoch: the number of minibatches of every worker's share.
int64_t data_parallel_steps_per_epoch(int64_t dataset_size, int32_t workers,
                                      int64_t batch_size, remainder_policy remainder);

} // namespace baton::model
