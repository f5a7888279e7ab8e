#pragma once

// `--save-model FILE` of job: ist, either scheme (docs/exporting.md).

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The whole trained network, assembled from every shard's final weights
/// (their owned slices; the reference's network with --mode local), as one
/// TorchScript module computing worker 0's evaluation: IST's mlp (its batch
/// norms use the batch's statistics, as IST evaluates) or ResIST's resnet18
/// (its partitioned blocks' residual branch scaled as in the evaluation).
/// actor_failed when a shard sent no weights; bad_file when the file cannot
/// be written.
caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path);

} // namespace ist
} // namespace modes
} // namespace baton::actors
