#pragma once

// `--mode local` for job: data-parallel: model::run_data_parallel_local, the
// one-process reference with W model replicas, on the data, model, task and
// optimizer the workers get (plan.hpp's worker_settings_of).
// Reported as the actor run reports: workers worker.0 .. worker.W-1 with the
// final weights' digest, and the group "workers" as the job's result.

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The reference run (torch threads: --threads, else runtime.compute_threads,
/// which the workers use: the same arithmetic bit for bit).
caf::expected<job_result> run_local(const topology& t, const run_request& r);

/// Seconds of one steady step of run_local's loop on `threads` torch
/// threads (its lanes as run_local cuts them), timed on random samples of
/// the workload's shape at the topology's batch and workers, from initial
/// weights (model::time_reference_steps): what `baton compare --predict`
/// takes for `local`. Errors: a task or model the topology cannot build.
caf::expected<double> time_local_step(const topology& t, int32_t threads);

/// `--save-model PATH`: the trained model (worker 0's weights and buffers,
/// which it sends at the end; the reference's final model with --mode local)
/// as a TorchScript module (model/core/export.hpp, docs/exporting.md), which
/// is also a whole-model checkpoint. Errors: weights missing or of the wrong
/// shape.
caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
