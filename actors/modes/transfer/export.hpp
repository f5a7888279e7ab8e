#pragma once

// `--save-model FILE` of job: transfer (docs/exporting.md).

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// The frozen backbone (backbone.checkpoint's weights, or the initial ones
/// with `checkpoint: none`) and every head that ran, with the weights it
/// sent at the end, as one TorchScript module whose forward(x) returns a
/// dict head name -> logits (model::script_module of a backbone and heads).
/// actor_failed when a head sent no weights; bad_file when the file cannot
/// be written.
caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
