#pragma once

// A worker of job: ist, for either subnet scheme S (subnet_scheme.hpp):
// trains its subnet of every round for L local steps, on minibatches of its
// own seeded order over the whole training set (as the authors' code draws
// them; model::ist_worker_minibatches).
//
//   round r (every actor computes the round's subnets from seed and r)
//     <- one "<kind>_subnet" from each shard: its pieces of this worker's
//        subnet (S::round_tensors)
//     -> S::train: the subnet assembled, L SGD steps (momentum reset every
//        round), cut back into every shard's pieces
//     -> "<kind>_trained" to each shard: those pieces (step_size: the
//        rounds per epoch, which the shards learn from it)
//   after an epoch's last round: its epoch report; worker 0 first waits
//   for every shard's owned tensors ("<kind>_owned", step = epoch) and
//   evaluates the whole network on the test split (S::evaluate, as the
//   reference does); at the end its trained count and final report (worker
//   0: the whole network's digest). The shards send the final weights.
//
// Recovery (actors/roles/checkpointing.hpp): the job's step is the round. A
// worker checkpoints its counters (epoch sums, epochs, local steps trained:
// the exactly-once counts) when a round is over, its epoch's end included,
// at the same rounds as the shards checkpoint their owned tensors. A
// restored worker starts at run.recovery.restore_step with those counters:
// the same subnets and minibatch order for every replayed round, and no
// local step counted twice. A `throw` fault fires when its pieces of that
// round are all there, before it trains them.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

struct neuron_scheme;
struct block_scheme;

/// The `<S::kind>_worker` role of a node's role table (ist_worker,
/// resist_worker): parses the settings, checks its dataset directory against
/// the node's data_dirs, loads the data and spawns a detached worker; starts
/// nothing on any error. Defined for neuron_scheme and block_scheme.
template <class Scheme>
caf::expected<caf::actor> spawn_worker_role(caf::actor_system& sys, const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
