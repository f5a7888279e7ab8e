#pragma once

// What the IST actors cut and glue, on top of model/ist/ist.hpp's pieces (no
// CAF): a worker's subnet assembled from the pieces its S shards sent and
// cut back into them, and a shard's owned slices of the whole network (what
// it sends for the evaluation and as the final weights). Owned slices are
// the pieces of the one-worker partition (ist_whole_partition), whose
// single subnet is the whole network: no second description of who owns
// what.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The network whose parameters() are `parameters` (fc1, bn1.w, bn1.b, fc2,
/// ..., the output layer). Throws model::error unless their count is 3k + 1.
model::ist_network ist_network_of(std::vector<at::Tensor> parameters);

/// The partition of one worker: every hidden neuron, in order. Its subnet
/// is the whole network, and its pieces for shard s are the slices shard s
/// owns.
model::ist_partition ist_whole_partition(const model::ist_shape& shape);

/// The values of `pieces` (ist_shard_pieces of `worker`) taken from `whole`.
std::vector<at::Tensor> ist_take_pieces(const model::ist_network& whole,
                                        const model::ist_partition& partition, int32_t worker,
                                        const std::vector<model::ist_piece>& pieces);

/// Writes `values` (as ist_take_pieces returned them) back into `whole`.
/// Throws model::error when their count or a shape differs.
void ist_put_pieces(model::ist_network& whole, const model::ist_partition& partition,
                    int32_t worker, const std::vector<model::ist_piece>& pieces,
                    const std::vector<at::Tensor>& values);

/// Worker `worker`'s subnet from the pieces of every shard (from_shards[s]:
/// shard s's tensors, in ist_shard_pieces order): each tensor concatenated
/// along its piece dim in shard order, equal to slice_subnet bit for bit.
/// Throws model::error on a missing piece or a wrong shape.
model::ist_network ist_assemble_subnet(const model::ist_shape& shape,
                                       const model::ist_partition& partition, int32_t worker,
                                       const std::vector<std::vector<at::Tensor>>& from_shards);

/// The pieces of `subnet` that go back to shard `shard` (contiguous copies).
std::vector<at::Tensor> ist_split_subnet(const model::ist_network& subnet,
                                         const model::ist_shape& shape,
                                         const model::ist_partition& partition, int32_t worker,
                                         int32_t shard, int32_t shards);

/// Scalars shard `shard` of `shards` owns (its owned slices together).
int64_t ist_owned_elements(const model::ist_shape& shape, int32_t shard, int32_t shards);

} // namespace ist
} // namespace modes
} // namespace baton::actors
