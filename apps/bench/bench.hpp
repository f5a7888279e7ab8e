#pragma once

// What the `baton bench` commands share.

#include <atomic>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/runtime/job_result.hpp"

namespace baton::actors {

/// Runs `baton run [topology] --set overrides... flags... --metrics-out` as
/// its own process (so that its peak memory and CPU time are its own), logs
/// to dir/label.log and returns its metrics. An empty `topology` is the
/// built-in default.
caf::expected<job_result> run_side(const std::string& topology,
                                   const std::vector<std::string>& overrides,
                                   std::vector<std::string> flags, const std::string& dir,
                                   const std::string& label, const std::atomic<bool>* interrupted);

} // namespace baton::actors
