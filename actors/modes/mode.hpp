#pragma once

// A training mode: one folder under actors/modes/, one entry of the registry
// (actors/modes/registry.cpp, the one list of modes).
//
//   name, section keys, parse   ->  its settings struct (topology::mode_settings)
//   plan(topology)              ->  job_plan: the actors, edges, threads and
//                                   nodes the runtime runs (placement, fault
//                                   checks and thread budgets read the plan)
//   local(topology, request)    ->  job_result: the same arithmetic in one
//                                   process, the reference
//
// plus optional hooks, null when the mode has nothing to do there.

#include <string>

#include <caf/expected.hpp>

#include "actors/config/job_schema.hpp"
#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {

/// One training mode (the value of `job:`).
struct mode {
  /// Its name (`job:`), the keys it reads (its section, and those it adds to
  /// the common sections) and `parse`, which reads them into its settings
  /// struct: what the topology parser is handed (all_job_schemas()).
  job_schema schema;
  /// The actors and edges of a run: made once, the same for every restart.
  caf::expected<job_plan> (*plan)(const topology& t) = nullptr;
  /// `--mode local`: the same data and arithmetic in one process, no actors:
  /// the reference the actor run is checked and benchmarked against.
  caf::expected<job_result> (*local)(const topology& t, const run_request& r) = nullptr;

  // -- optional hooks ---------------------------------------------------------
  /// Before anything runs (e.g. pre-train a missing backbone).
  caf::expected<void> (*prepare)(const topology& t) = nullptr;
  /// Before an actor run plans: settles what the topology left to planning
  /// (transfer: `backbone.split: auto`, for `local_nodes`).
  caf::expected<void> (*settle)(topology& t, int32_t local_nodes) = nullptr;
  /// `--save-model PATH`: the trained model, from the weights the actors sent.
  caf::expected<void> (*save_model)(const topology& t, const job_result& result,
                                    const std::string& path) = nullptr;
  /// `--baseline separate`: the job as independent processes.
  caf::expected<job_result> (*run_separate)(const topology& t, const run_request& r) = nullptr;
  /// `--trace`: its actors record their schedule.
  bool traces = false;

  /// The value of `job:`.
  const std::string& name() const { return schema.name; }
};

} // namespace modes
} // namespace baton::actors
