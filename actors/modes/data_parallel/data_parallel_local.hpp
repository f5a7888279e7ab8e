#pragma once

// `--mode local` for job: data-parallel: model::run_data_parallel_local, the
// one-process reference with W model replicas, on the data, model, task and
// optimizer the workers get (data_parallel_plan.hpp's worker_settings).
// Reported as the actor run reports: workers worker.0 .. worker.W-1 with the
// final weights' digest, and the group "workers" as the job's result.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

/// The reference run (torch threads: --threads, else runtime.stage_threads,
/// which the workers use: the same arithmetic bit for bit).
caf::expected<job_result> run_data_parallel_local_job(const topology& t, const run_request& r);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
