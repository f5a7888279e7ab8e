#pragma once

// ResIST's subnet scheme (ist.kind: resist; subnet_scheme.hpp): resnet18's
// partitioned residual blocks are dealt to the workers every round
// (model::ist::make_resist_deal of seed and round, computed by every actor); a
// worker holds the whole network and trains its sub-ResNet (the shared
// layers and its blocks); the shards own the network's state tensors
// (model::layered_model::state(): parameters, then buffers) and average
// what the workers send back (model::ist::resist_average).
//
// - shard s owns the contiguous state tensors [bounds[s], bounds[s + 1]):
//   tensor k goes to the shard floor(offset_k x S / total) of its first byte,
//   so the ranges are balanced by bytes (a tensor is never split).
// - a round's messages carry, in ascending index order, the shard's tensors
//   of the layers worker w runs in that round (the shared layers and its
//   blocks): the shard sends them as the round's starting state, the worker
//   copies them in and sends them back trained. The first round a shard
//   sends after a (re)start carries its whole range (a restored worker's
//   network is the initial one). A shard's owned tensors are its range:
//   what it checkpoints, sends worker 0 for the evaluation and sends as the
//   final weights.

#include "actors/modes/ist/subnet_scheme.hpp"
#include "model/core/layered_model.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The network as block_scheme divides it.
struct block_layout {
  size_t layers = 0;                ///< m.size()
  std::vector<size_t> partitioned;  ///< model::ist::resist_partitioned_layers
  std::vector<size_t> state_layers; ///< model::ist::resist_state_layers: each state tensor's layer
  /// S + 1 ascending state indices: shard s owns [bounds[s], bounds[s + 1]).
  std::vector<size_t> bounds;
};

/// The layout of `m` over `shards` shards (>= 1). Throws model::error when
/// m is not a resnet18 (no partitioned block).
block_layout make_block_layout(const model::layered_model& m, int32_t shards);

/// The state tensors (ascending indices) of shard `shard`'s range that
/// travel between it and worker `worker` in the round of `deal`: those of
/// the layers the worker runs, or all of the range when `whole`.
std::vector<size_t> message_tensors(const block_layout& layout,
                                    const model::ist::resist_deal& deal, int32_t worker,
                                    int32_t shard, bool whole);

/// Checks that `values` fit the state tensors `indices` of `state` (count,
/// shape, dtype); throws model::error naming `what` and the first misfit.
void check_block_tensors(const std::vector<at::Tensor>& values,
                         const std::vector<at::Tensor>& state,
                         const std::vector<size_t>& indices, const std::string& what);

/// ResIST's network as the settings carry it: resnet18 over `in_channels`
/// input channels with a classifier of `classes` outputs.
struct resnet_shape {
  int64_t in_channels = 1; ///< the samples' channels (1: Fashion-MNIST)
  int64_t classes = 10;
};

/// The most input channels: resnet18's stem takes 1 (Fashion-MNIST) to a few.
inline constexpr int64_t resnet_max_channels = 64;

/// in_channels (1 to resnet_max_channels), classes (positive).
template <class Inspector>
void inspect(Inspector& f, resnet_shape& x) {
  f.field("in_channels", x.in_channels).in(1, resnet_max_channels);
  f.field("classes", x.classes).at_least(1);
}

/// ResIST's network for subnet_scheme: resnet18's names and types.
struct resnet_blocks {
  static constexpr scheme_names names{"resist", "ResIST", "sub-ResNet"};
  using shape = resnet_shape;
  using reference_result = model::ist::resist_result;

  /// What a worker holds: the whole network (the layers it runs are
  /// current) and how the shards divide it.
  struct worker_model {
    model::layered_model network;
    block_layout layout;
  };

  /// What a shard holds: its range of the state, merged after every round.
  struct shard_model {
    block_layout layout;
    std::vector<at::Tensor> state; ///< by state index: its range, the rest undefined
    model::ist::resist_deal deal;       ///< this round's
    int64_t round = 0;
    std::vector<std::vector<at::Tensor>> trained; ///< by worker: this round's, as they come
  };
};

/// ResIST's scheme: resnet18's partitioned residual blocks dealt to the
/// workers every round (ist.kind: resist). Its functions: block_scheme.cpp.
using block_scheme = subnet_scheme<resnet_blocks>;

} // namespace ist
} // namespace modes
} // namespace baton::actors
