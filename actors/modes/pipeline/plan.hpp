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

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// The plan of a pipeline topology (job: pipeline); bad_config (naming the
/// file) when a stage has more replicas than a minibatch has microbatches,
/// or the task it trains on is not one of the topology's.
caf::expected<job_plan> plan(const topology& t);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
