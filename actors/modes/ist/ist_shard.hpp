#pragma once

// A shard of job: ist, for either subnet scheme S (subnet_scheme.hpp): owns
// 1/S of the network (IST: of the neurons of every hidden layer; ResIST: a
// range of its state tensors) and hands every worker its pieces of the
// round's subnet.
//
//   start
//     -> round r: S::begin_round (the round's subnets from seed and r); to
//        every worker w, the pieces of w's subnet it owns ("<kind>_subnet",
//        step r)
//     -> wait for every worker's trained pieces ("<kind>_trained", step r),
//        S::take_trained as each comes, S::end_round when all came (IST:
//        nothing, every piece is back in place; ResIST: the average)
//     -> the epoch's last round: its owned tensors to worker 0, which
//        evaluates the whole network ("<kind>_owned", step = epoch)
//     -> the run's last round: its owned tensors to the coordinator as its
//        share of the final weights ("weights"), its report, done
//     -> else round r + 1
//
// Every actor computes the round's subnets from seed and round: no
// partition messages. The rounds per epoch come from the workers (their
// data size: each "<kind>_trained" carries it in step_size); a shard checks
// they agree.
//
// Recovery (actors/roles/checkpointing.hpp): the job's step is the round.
// After round r's pieces are all back, a shard checkpoints its owned
// tensors as step r + 1 when due and tells the coordinator of it; a restored
// shard starts at run.recovery.restore_step with the tensors of that
// checkpoint and replays the round with the same subnets. A `throw` fault
// fires when the first trained pieces of its round come back (the middle of
// a round).

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

struct neuron_scheme;
struct block_scheme;

/// The `<S::kind>_shard` role of a node's role table (ist_shard,
/// resist_shard): parses the settings, checks its checkpoint directory
/// against the node's and spawns a detached shard with its initial (or
/// restored) tensors; starts nothing on any error. Defined for
/// neuron_scheme and block_scheme.
template <class Scheme>
caf::expected<caf::actor> spawn_shard_role(caf::actor_system& sys, const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
