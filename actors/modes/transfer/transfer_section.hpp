#pragma once

// The topology of job: transfer, as its mode reads it: it has no section of
// its own (the frozen backbone's slices are `backbone.split`, the heads
// `heads`); its actors are the frozen stages and the trainable heads.

#include "actors/config/job_schema.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

/// The schema of job: transfer, for the topology parser.
job_schema transfer_schema();

} // namespace transfer
} // namespace modes
} // namespace baton::actors
