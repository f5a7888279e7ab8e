#pragma once

// The pipeline job (PipeDream) as a plan, here with stage 1 replicated:
//
//   source -> stage0 -+-> stage1.0 -+-> stage2     every stage trainable;
//   (starts)          +-> stage1.1 -+              the last one has the loss
//                         (peers: they sum their gradients)
//
// Consecutive stages are connected all to all, in replica order; replicas of
// a stage are peers of each other. The last stage's replicas report one
// result; replica 0 of each stage sends its weights. Every optimiser step is
// a consistent cut under gpipe and 1f1b-flush, not under asynchronous 1f1b.

#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/mode.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// The plan of a pipeline topology (job: pipeline); bad_config (naming the
/// file) when a stage has more replicas than a minibatch has microbatches,
/// or the task it trains on is not one of the topology's.
/// With `pipeline.stages: auto` unsettled, the provisional even split the
/// parser made.
caf::expected<job_plan> plan(const topology& t);

/// The plan for `use`: for a run, the planner's stages first
/// (settle_stages); for a check, as the settings stand (nothing is
/// measured).
caf::expected<job_plan> plan(const topology& t, plan_use use);

/// With `pipeline.stages: auto` (or no stages): profiles the pipeline's
/// model and sets its stages to the planner's fastest straight pipeline on
/// at most machines_of(t) machines (plan_pipeline_stages,
/// actors/modes/backbone_split.hpp; links between node processes when `t`
/// has nodes), clears stages_auto and logs "pipeline: stages from the
/// planner: [conv1..pool1] [...]". Returns what it settled as the `--set`
/// override that gives another run these stages without planning
/// (`pipeline.stages=[{last_layer: pool1}, {last_layer: fc2}]`); nothing
/// happens, and nothing is returned, when the topology gives its stages.
caf::expected<std::vector<std::string>> settle_stages(topology& t);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
