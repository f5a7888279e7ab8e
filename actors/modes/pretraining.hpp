#pragma once

// Pre-training the workload's backbone (`backbone.pretrain`): what the modes
// that start from a pretrained backbone (transfer, data-parallel) prepare
// before a run, and what `baton pretrain` does.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace modes {

/// Makes the backbone checkpoint (`backbone.checkpoint`) by pre-training
/// when it is missing, and says so; nothing when it exists or the topology
/// has none. A mode's `prepare` hook.
caf::expected<void> ensure_pretrained(const topology& t);

/// Pre-trains the backbone and writes its checkpoint, whether or not one
/// exists (`baton pretrain`); nothing when the topology has none.
caf::expected<void> pretrain_backbone(const topology& t);

} // namespace modes
} // namespace baton::actors
