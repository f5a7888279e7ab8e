#pragma once

// An IST worker: trains one subnet per round for L local steps, on
// minibatches of its own seeded order over the whole training set (as the
// authors' code draws them; model::ist_worker_minibatches).
//
//   round r (every actor computes the partition from seed and r)
//     <- one "ist_subnet" from each shard: its pieces of this worker's subnet
//     -> the subnet: each tensor concatenated along its piece dim in shard
//        order (== model::slice_subnet)
//     -> model::ist_local_steps: L SGD steps (momentum reset every round)
//     -> "ist_trained" to each shard: the same pieces, trained (step_size:
//        the rounds per epoch, which the shards learn from it)
//   after an epoch's last round: its epoch report; worker 0 first waits
//   for every shard's owned slices ("ist_owned"), assembles the whole
//   network and evaluates it on the test split (model::ist_evaluate, as
//   the reference does); at the end its trained count and final report
//   (worker 0: the whole network's digest). The shards send the final
//   weights.
//
// Recovery (actors/roles/recovery.hpp): the job's step is the round. A
// worker checkpoints its counters (epoch sums, epochs, local steps trained:
// the exactly-once counts) when a round is over, its epoch's end included,
// at the same rounds as the shards checkpoint their slices. A restored
// worker starts at run.recovery.restore_step with those counters: the same
// partition and minibatch order for every replayed round, and no local step
// counted twice. A `throw` fault fires when its pieces of that round are
// all there, before it trains them.

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/ist/ist_specs.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// Loads the worker's data and spawns a detached worker `name`.
caf::expected<caf::actor> spawn_ist_worker(caf::actor_system& sys, const std::string& name,
                                           const std::string& node, const ist_worker_spec& spec);

/// The `ist_worker` role of a node's role table: parses the settings, checks
/// its dataset directory against the node's data_dirs and spawns; starts
/// nothing on any error.
caf::expected<caf::actor> spawn_ist_worker_role(caf::actor_system& sys, const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
