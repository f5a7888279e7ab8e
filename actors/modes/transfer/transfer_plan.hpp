#pragma once

// The transfer job as a plan:
//
//   source -> stage0 -> ... -> stageN-1 -+-> head a
//   (starts)   frozen backbone slices    +-> head b    trainable, one result each
//                                        +-> ...
//
// Every microbatch crosses the frozen backbone once and goes to every head.
// Every optimiser step of a head is a consistent cut (heads are independent).

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

/// The plan of a transfer topology (job: transfer).
job_plan plan_transfer(const topology& t);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
