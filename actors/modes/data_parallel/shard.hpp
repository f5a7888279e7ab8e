#pragma once

// A parameter shard of job: data-parallel with `exchange: ps` (role
// `data_parallel_shard`): it owns a contiguous part of the flat parameters
// (ps_exchange.hpp: shard_parts), its momentum and the lr schedule, and
// takes the optimizer steps of that part.
//
//   spawn: the model from the same model_spec as the workers (the same
//          initial weights), kept as the part's flat slice
//   (group_atom, worker w, w) x W   the plan's peer edges: every worker
//   push (tensor_set "ps_push", step k) from each worker
//     -> all W of step k: sum in worker order, / W, sgd_step_out_of_place
//     -> the new slice (tensor_set "ps_pull", step k) to every worker
//   after the run's last step: its final report (edge bytes per worker)
//
// A shard whose part is empty (its whole range frozen) is idle: no worker
// pushes to it, and it reports at its start.
//
// Recovery (actors/roles/checkpointing.hpp): shards are trainable actors of the
// plan. After its step s - 1 a shard checkpoints, when s is due, its slice
// and momentum slice as step s (an idle shard writes its empty checkpoints
// at its start); a restored shard starts at run.recovery.restore_step with
// them. A `throw` fault fires when the first push of that step arrives.
// The run's steps (and the lr schedule's steps per epoch) come from the
// training split's size, which the shard reads without loading the data.

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/data_parallel/shard_settings.hpp"
#include "actors/roles/role_type.hpp"
#include "model/core/layered_model.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The training samples `data` describes (a split's size after its limit),
/// read from the files' headers only. Throws model::error.
int64_t training_samples(const source_settings& data);

/// Builds the shard's part and spawns a detached shard `name`.
caf::expected<caf::actor> spawn_shard(caf::actor_system& sys,
                                      const std::string& name,
                                      const std::string& node,
                                      const shard_settings& spec);

/// The `data_parallel_shard` role of a node's role table: parses the
/// settings, checks its dataset directory against the node's data_dirs and
/// spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_shard_role(caf::actor_system& sys, const spawn_args& args);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
