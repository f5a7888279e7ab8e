#pragma once

// `--mode local` for job: ist: the scheme's reference (model::ist::run_local,
// model::ist::run_resist_local for ist.kind: resist), the whole run in one
// process without actors, on the data, network, task and optimizer the
// workers get (ist_worker_settings). Reported as the actor run reports:
// worker.0 with the final network's digest, the other workers and the
// shards without one, and the group "workers" as the job's result.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The reference run (torch threads: --threads, else runtime.compute_threads,
/// which the workers use: the same arithmetic bit for bit).
caf::expected<job_result> run_local(const topology& t, const run_request& r);

} // namespace ist
} // namespace modes
} // namespace baton::actors
