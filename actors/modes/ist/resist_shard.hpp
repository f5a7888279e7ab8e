#pragma once

// A ResIST shard (ist.kind: resist): owns a contiguous range of the
// network's state tensors (resist_pieces.hpp: balanced by bytes) and merges
// them after every round as model::resist_merge does.
//
//   start
//     -> round q: to every worker, its range's tensors of the layers the
//        worker runs in q ("resist_state", step q; whole after a (re)start
//        and to worker 0 before an evaluation)
//     -> wait for every worker's trained tensors ("resist_trained", step q)
//     -> each tensor: model::resist_average over the workers that ran its
//        layer, in ascending worker order (all W for a shared layer, the
//        holders for a partitioned block)
//     -> the run's last round: its tensors to the coordinator as its share
//        of the final weights ("weights") and the whole state to worker 0
//        (the last evaluation), its report, done; else round q + 1
//
// The rounds per epoch come from the workers (each "resist_trained" carries
// them in step_size); a shard checks they agree.
//
// Recovery (actors/roles/recovery.hpp): the job's step is the round. When
// round q is merged, a shard checkpoints its tensors as step q + 1 when due;
// a restored shard starts at run.recovery.restore_step with them and sends
// that round's state whole. A `throw` fault fires when the first trained
// tensors of its round come back (the middle of a round).

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/ist/resist_specs.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// Spawns a detached shard `name` with its range of the initial network
/// (or of its checkpoint).
caf::expected<caf::actor> spawn_resist_shard(caf::actor_system& sys, const std::string& name,
                                             const std::string& node,
                                             const resist_shard_spec& spec);

/// The `resist_shard` role of a node's role table: parses the settings and
/// spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_resist_shard_role(caf::actor_system& sys,
                                                  const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
