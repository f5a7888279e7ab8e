#pragma once

// The pipeline job's one-process reference (`--mode local`) and the model it
// trained (`--save-model`).

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// Trains the pipeline's model in one thread: the same microbatches in the
/// same order, the same arithmetic. Flush schedules: the whole model as one
/// stage with gradient accumulation. 1f1b and 1f1b-dynamic: one trainer per
/// stage, in PipeDream's static 1F1B order (the actors' 1f1b order, so its
/// weights equal theirs; replicated stages are trained as one). Per-stage
/// digests are taken by slicing the model at the pipeline's boundaries, so
/// they compare with the stages'. `--threads` defaults to the stages' thread
/// budget (then the sums are the same bit for bit).
caf::expected<job_result> run_local(const topology& t, const run_request& r);

/// The whole trained model of a pipeline run (its stages' weights in order)
/// as a TorchScript module (model/core/export.hpp, docs/exporting.md): what
/// PyTorch runs, and a checkpoint of backbone + classifier in the form
/// `baton pretrain` writes and a transfer job's `backbone.checkpoint` reads.
caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
