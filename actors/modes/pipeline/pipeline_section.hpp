#pragma once

// The topology of job: pipeline, as its mode reads it: the `pipeline:`
// section (schedule, stages and their replicas), its stage actors' names,
// edges and placement, and the rule that recovery needs a synchronous
// schedule.

#include "actors/config/job_schema.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace pipeline {

/// The schema of job: pipeline, for the topology parser.
job_schema pipeline_schema();

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
