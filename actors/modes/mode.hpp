#pragma once

// A training mode: one folder under actors/modes/, one entry of the registry
// (actors/modes/registry.cpp, the one list of modes).
//
//   name, section keys, parse   ->  its settings struct (topology::mode_spec)
//   plan(topology, use)         ->  job_plan: the actors, edges, threads and
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

/// What a plan is made for.
enum class plan_use {
  /// The checks of a topology as it is read (thread budgets, faults): its
  /// actors, edges and threads; nothing is measured.
  check,
  /// A run (or `plan_of`): also what the topology leaves to planning (transfer's
  /// `backbone.split: auto` profiles the backbone). Made once per run, with the
  /// cluster's nodes known by name.
  run
};

/// A mode's plan that measures nothing: the same for checks and runs.
template <auto Plan>
caf::expected<job_plan> same_plan(const topology& t, plan_use) {
  return Plan(t);
}

/// One training mode (the value of `job:`).
struct mode {
  /// Its name (`job:`), the keys it reads (its section, and those it adds to
  /// the common sections) and `parse`, which reads them into its settings
  /// struct: what the topology parser is handed (all_job_schemas()).
  job_schema schema;
  /// The actors and edges of a run: made once, the same for every restart
  /// (same_plan<f> for a plan `f(topology)` that measures nothing).
  caf::expected<job_plan> (*plan)(const topology& t, plan_use use) = nullptr;
  /// `--mode local`: the same data and arithmetic in one process, no actors:
  /// the reference the actor run is checked and benchmarked against.
  caf::expected<job_result> (*local)(const topology& t, const run_request& r) = nullptr;

  // -- optional hooks ---------------------------------------------------------
  /// Before anything runs (e.g. pre-train a missing backbone).
  caf::expected<void> (*prepare)(const topology& t) = nullptr;
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
