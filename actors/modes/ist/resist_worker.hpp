#pragma once

// A ResIST worker (ist.kind: resist): holds the whole resnet18 and trains
// its sub-ResNet of every round (the shared layers and the blocks dealt to
// it) for L local steps on minibatches of its own seeded order over the
// whole training set (model::ist_worker_minibatches, as job: ist draws them).
//
//   round q (every actor computes the deal from seed and q)
//     <- one "resist_state" from each shard: the merged state of the layers
//        it runs in round q (resist_message_tensors), copied in
//     -> model::resist_local_steps: L SGD steps (momentum reset every round)
//     -> "resist_trained" to each shard: the same tensors, trained
//        (step_size: the rounds per epoch, which the shards learn from it)
//   after an epoch's last round: its epoch report; worker 0 first waits for
//   the whole merged state (a "whole" resist_state) and evaluates it with
//   the partitioned blocks scaled (model::resist_evaluate); at the end its
//   trained count and final report (worker 0: the network's digest, equal
//   to model::run_resist_local's).
//
// Recovery (actors/roles/recovery.hpp), as job: ist: the job's step is the
// round; a worker checkpoints its counters when a round is over, at the
// rounds the shards checkpoint their tensors. A restored worker starts at
// run.recovery.restore_step, whose state every shard sends whole. A `throw`
// fault fires when its state of that round is all there, before it trains.

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/ist/resist_specs.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// Loads the worker's data and spawns a detached worker `name`.
caf::expected<caf::actor> spawn_resist_worker(caf::actor_system& sys, const std::string& name,
                                              const std::string& node,
                                              const resist_worker_spec& spec);

/// The `resist_worker` role of a node's role table: parses the settings,
/// checks its dataset directory against the node's data_dirs and spawns;
/// starts nothing on any error.
caf::expected<caf::actor> spawn_resist_worker_role(caf::actor_system& sys,
                                                   const spawn_args& args);

} // namespace ist
} // namespace modes
} // namespace baton::actors
