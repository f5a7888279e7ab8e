#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/pipeline/stage_settings.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// Builds the stage's slice of the backbone + classifier (initial weights from
/// the seed) and spawns a detached trainable pipeline stage named `name`.
///
/// The schedule is the choice between a waiting backward and a new forward:
///   gpipe       forwards first; one step per minibatch after its backwards
///   1f1b-flush  a waiting backward first; one step per minibatch; no forward
///               of minibatch k+1 before the step of k (the flush)
///   1f1b        PipeDream's static 1F1B order: a forward while fewer than
///               `max_in_flight` are in flight (warm-up, then one forward
///               after each backward), backwards before an evaluation or a
///               control (cool-down); the stage waits for what its next
///               operation needs, so every forward's weight version, and
///               the weights, follow from the input order alone; a step
///               after every backward; weight stashing keeps each backward
///               on its forward's version
///   1f1b-dynamic  as 1f1b, but a waiting backward first and a forward
///               whenever a credit returns: versions depend on timing
/// Forwards also need a credit of the output window and, except under gpipe,
/// fewer than `max_in_flight` microbatches between forward and backward
/// (PipeDream's NOAM); gradients go back to the sender of the microbatch. The
/// last stage computes the loss right after its forward. Evaluation
/// microbatches and controls wait until nothing is in flight, so an epoch's
/// report sees its final weights.
///
/// A replica (spec.replicas > 1) gets its share of each minibatch (see
/// fanout), sums its gradients per minibatch, exchanges the sums with its
/// peers (tensor_set) and steps with their sum in replica order, so that all
/// replicas hold the same weights. Under vertical sync, a stage runs each
/// microbatch with the weight version the input stage stamped on it.
caf::expected<caf::actor> spawn_stage(caf::actor_system& sys, const std::string& name,
                                      const std::string& node,
                                      const stage_settings& spec);

/// Refuses (errc::bad_file) a pipeline_stage whose settings read a file outside the
/// node's roots: its checkpoint directory and TorchScript file against `checkpoint_dir`.
caf::error check_paths(const stage_settings& spec, const path_roots& roots);

/// The `pipeline_stage` role of a node's role table: parses the settings, checks
/// their files (check_paths) and spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_stage_role(caf::actor_system& sys, const spawn_args& args);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
