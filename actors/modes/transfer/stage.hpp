#pragma once

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/transfer/stage_settings.hpp"
#include "actors/roles/role_type.hpp"
#include "messages/types.hpp"
#include "model/core/feature_cache.hpp"
#include "model/core/layered_model.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// The whole frozen backbone `spec` names, its checkpoint loaded, built once
/// for every stage of this process that slices it while one of them holds
/// it (a 3-stage run in one process built it and read its checkpoint 3
/// times); the stages only read it, each its own layers. Built again when
/// the backbone's declaration, its TorchScript file or its checkpoint
/// (path, size or modification time) differ. Throws what make_model and
/// load_checkpoint throw.
std::shared_ptr<const model::layered_model> whole_backbone(const stage_settings& spec);

/// Slices [begin, end) of whole_backbone (its weights loaded from the
/// checkpoint; errors are returned, nothing is spawned) and spawns a detached
/// frozen stage named `name`, which holds the whole backbone while it lives.
///
/// A stage computes its features as `spec.features` says
/// (model::frozen_backbone): with `cache`, the stage that holds the whole
/// backbone keeps each sample's features, keyed by the microbatch's sample
/// ids (test-split ones apart), and runs the backbone on the others only.
///
/// A stage keeps its inputs in arrival order. It forwards a microbatch when
/// every output window has a credit; it returns the upstream credit when it
/// takes the microbatch up (so the next transfer overlaps this compute).
/// Controls are forwarded in order, without credits.
caf::expected<caf::actor> spawn_stage(caf::actor_system& sys, const std::string& name,
                                      const std::string& node, const stage_settings& spec);

/// Adds what `backbone` did to `report`, as the stage and `--mode local`
/// report it: figures feature_block, backbone_train_samples,
/// backbone_train_computed (rows the backbone ran rather than read from its
/// cache), backbone_eval_samples, backbone_eval_computed,
/// backbone_forward_rows (canonical blocks' repeated rows included) and,
/// with a cache, cache_hits, cache_misses, cache_rejected, cache_entries,
/// cache_bytes; and one event per ended epoch, {"event": "backbone_epoch",
/// "epoch" (from 1), "train_samples", "train_computed", "eval_samples",
/// "eval_computed", "forward_rows"}.
void report_features(const model::frozen_backbone& backbone, messages::actor_report& report);

/// Refuses (errc::bad_file) a stage whose settings read a file outside the
/// node's roots: its backbone checkpoint and TorchScript file against `checkpoint_dir`.
caf::error check_paths(const stage_settings& spec, const path_roots& roots);

/// The `stage` role of a node's role table: parses the settings, checks
/// their files (check_paths) and spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_stage_role(caf::actor_system& sys, const spawn_args& args);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
