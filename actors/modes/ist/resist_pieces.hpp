#pragma once

// What the ResIST actors (ist.kind: resist) agree on without messages: how
// the state tensors of the network (model::layered_model::state():
// parameters, then buffers) are divided among the S shards, and which of a
// shard's tensors travel between it and worker w in a round. Every actor
// computes the same answers from the architecture, S and the round's deal
// (model::make_resist_deal of seed and round).
//
// - shard s owns the contiguous state tensors [bounds[s], bounds[s + 1]):
//   tensor k goes to the shard floor(offset_k x S / total) of its first byte,
//   so the ranges are balanced by bytes (a tensor is never split).
// - a round's messages carry, in ascending index order, the shard's tensors
//   of the layers worker w runs in that round (the shared layers and its
//   blocks): the shard sends them as the round's starting state, the worker
//   sends them back trained. A "whole" message carries every tensor of the
//   shard's range (the first round a shard sends after a (re)start, and
//   worker 0's state before an evaluation).

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/layered_model.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The network as the ResIST actors divide it.
struct resist_layout {
  size_t layers = 0;                ///< m.size()
  std::vector<size_t> partitioned;  ///< model::resist_partitioned_layers
  std::vector<size_t> state_layers; ///< model::resist_state_layers: each state tensor's layer
  /// S + 1 ascending state indices: shard s owns [bounds[s], bounds[s + 1]).
  std::vector<size_t> bounds;
};

/// The layout of `m` over `shards` shards (>= 1). Throws model::error when
/// m is not a resnet18 (no partitioned block).
resist_layout make_resist_layout(const model::layered_model& m, int32_t shards);

/// The state tensors (ascending indices) of shard `shard`'s range that
/// travel between it and worker `worker` in the round of `deal`: those of
/// the layers the worker runs, or all of the range when `whole`.
std::vector<size_t> resist_message_tensors(const resist_layout& layout,
                                           const model::resist_deal& deal, int32_t worker,
                                           int32_t shard, bool whole);

/// Checks that `values` fit the state tensors `indices` of `state` (count,
/// shape, dtype); throws model::error naming `what` and the first misfit.
void check_resist_tensors(const std::vector<at::Tensor>& values,
                          const std::vector<at::Tensor>& state,
                          const std::vector<size_t>& indices, const std::string& what);

/// Bytes of `tensors`.
int64_t resist_bytes(const std::vector<at::Tensor>& tensors);

} // namespace ist
} // namespace modes
} // namespace baton::actors
