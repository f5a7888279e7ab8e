#pragma once

// An IST shard: owns 1/S of the neurons of every hidden layer
// (model::ist_shard_neurons) with their incoming first-layer rows, their
// batch norm parameters and their outgoing weights. It holds a whole
// ist_network made from the run's seed and only reads and writes the slices
// it owns (take_piece / put_piece touch nothing else).
//
//   start
//     -> round r: partition(seed, r); to every worker w, the pieces of w's
//        subnet it owns ("ist_subnet", step r)
//     -> wait for every worker's trained pieces ("ist_trained", step r),
//        put each back in place as it comes
//     -> the epoch's last round: its owned slices to worker 0, which
//        evaluates the whole network ("ist_owned", step = epoch)
//     -> the run's last round: the owned slices to the coordinator as its
//        share of the final weights ("weights"), its report, done
//     -> else round r + 1
//
// Every actor computes the partition from seed and round: no partition
// messages. The rounds per epoch come from the workers (their data size:
// each "ist_trained" carries it in step_size); a shard checks they agree.
//
// Recovery (actors/roles/recovery.hpp): the job's step is the round. After
// round r's pieces are all back, a shard checkpoints its owned slices as
// step r + 1 when due and tells the coordinator of it; a restored shard
// starts at run.recovery.restore_step with the slices of that checkpoint
// and replays the round with the same partition. A `throw` fault fires when
// the first trained pieces of its round come back (the middle of a round).

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/ist/ist_specs.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// Spawns a detached shard `name` with its initial network.
caf::expected<caf::actor> spawn_ist_shard(caf::actor_system& sys, const std::string& name,
                                          const std::string& node, const ist_shard_spec& spec);

/// The `ist_shard` role of a node's role table: parses the settings and
/// spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_ist_shard_role(caf::actor_system& sys, const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
