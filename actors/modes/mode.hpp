#pragma once

// A training mode, as the `baton` command sees it: its plan for the runtime
// and what it offers besides (its one-process reference, a model to save, a
// baseline). actors/modes/registry.cpp lists the modes; nothing else does.

#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {

/// One training mode (the value of `job:`). Optional parts are null.
struct training_mode {
  std::string name; ///< the value of `job:`
  /// The actors and edges of a run: made once, the same for every restart.
  caf::expected<job_plan> (*plan)(const topology& t);
  /// `--mode local`: the same data and arithmetic in one process, no actors:
  /// the reference the actor run is checked and benchmarked against.
  caf::expected<job_result> (*run_local)(const topology& t, const run_request& r);
  /// Before anything runs (e.g. pre-train a missing backbone).
  caf::expected<void> (*prepare)(const topology& t) = nullptr;
  /// Before an actor run places anything: settles what the topology left
  /// to planning (transfer: `backbone.split: auto`, for `local_nodes`).
  caf::expected<void> (*settle)(topology& t, int32_t local_nodes) = nullptr;
  /// `--save-model PATH`: the trained model, from the weights the actors sent.
  caf::expected<void> (*save_model)(const topology& t, const job_result& result,
                                    const std::string& path) = nullptr;
  /// `--baseline separate`: the job as independent processes.
  caf::expected<job_result> (*run_separate)(const topology& t, const run_request& r) = nullptr;
  /// `--trace`: its actors record their schedule.
  bool traces = false;
};

} // namespace modes
} // namespace baton::actors
