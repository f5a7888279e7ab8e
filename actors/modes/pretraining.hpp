#pragma once

// Pre-training the workload's backbone (`backbone.pretrain`): what the modes
// that start from a pretrained backbone (transfer, data-parallel) prepare
// before a run, and what `baton pretrain` does.

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace modes {

/// A mode's `prepare` hook: nothing when the topology has no backbone
/// checkpoint (`backbone.checkpoint`). One that exists is refused (bad_config
/// naming the key's file:line, what does not fit and how the file was made)
/// when it does not fit the model the run trains, as its stages and workers
/// would load it; a warning when it fits but was pre-trained with other
/// settings than the topology's `backbone.pretrain` gives
/// (pretraining_settings_text), nothing else. A missing one is
/// pre-trained first (and logged) only with `backbone.pretrain.if_missing:
/// pretrain`; otherwise the run is refused (bad_config naming the key's
/// file:line, the path and the hint `baton pretrain FILE`), so that a
/// mistyped path is never a silent training from scratch.
caf::expected<void> ensure_pretrained(const topology& t);

/// Pre-trains the backbone and writes its checkpoint, whether or not one
/// exists (`baton pretrain`), with pretraining_settings_text(t) in it;
/// nothing when the topology has none.
caf::expected<void> pretrain_backbone(const topology& t);

/// What decides the pretrained weights, as "key: value" lines (the model,
/// the seed, `backbone.pretrain`'s task, epochs, samples and optimizer, the
/// batches and the data): stored in the checkpoint by pretrain_backbone and
/// compared by ensure_pretrained, which warns when an existing file was made
/// with other values than a topology's `backbone.pretrain` gives now.
std::string pretraining_settings_text(const topology& t);

} // namespace modes
} // namespace baton::actors
