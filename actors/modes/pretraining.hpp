#pragma once

// Pre-training the workload's backbone (`backbone.pretrain`): what the modes
// that start from a pretrained backbone (transfer, data-parallel) prepare
// before a run, and what `baton pretrain` does.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace modes {

/// A mode's `prepare` hook: nothing when the backbone checkpoint
/// (`backbone.checkpoint`) exists or the topology has none. A missing one is
/// pre-trained first (and logged) only with `backbone.pretrain.if_missing:
/// pretrain`; otherwise the run is refused (bad_config naming the key's
/// file:line, the path and the hint `baton pretrain FILE`), so that a
/// mistyped path is never a silent training from scratch.
caf::expected<void> ensure_pretrained(const topology& t);

/// Pre-trains the backbone and writes its checkpoint, whether or not one
/// exists (`baton pretrain`); nothing when the topology has none.
caf::expected<void> pretrain_backbone(const topology& t);

} // namespace modes
} // namespace baton::actors
