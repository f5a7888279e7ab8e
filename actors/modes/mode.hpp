#pragma once

// A training mode: one folder under actors/modes/, one entry of the registry
// (actors/modes/registry.cpp, the one list of modes). Five hooks:
//
//   parse (in its schema)       ->  its settings struct (topology::mode_spec),
//                                   its length and what it refuses of recovery
//   plan(topology, use)         ->  job_plan: the actors, edges, threads and
//                                   nodes the runtime runs (placement, fault
//                                   checks and thread budgets read the plan)
//   local(topology, request)    ->  job_result: the same arithmetic in one
//                                   process, the reference (and its
//                                   baseline, --baseline separate, if any)
//   save_model                  ->  its export (null when it has none)
//   cost(request, profiles)     ->  costed_strategy: its settings as the
//                                   cost model's (null: not predicted)
//
// and data: its section's keys, its roles, its rows of compare's catalogue,
// whether it has a separate baseline, whether it starts from a pretrained
// backbone and whether its actors trace.

#include <string>

#include <caf/expected.hpp>

#include "actors/config/job_schema.hpp"
#include "actors/config/topology.hpp"
#include "actors/modes/costing.hpp"
#include "actors/modes/strategy_variant.hpp"
#include "actors/roles/role_type.hpp"
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
  /// the reference the actor run is checked and benchmarked against; with
  /// `--baseline separate` (run_request::baseline, where
  /// `separate_baseline`), the job as independent processes.
  caf::expected<job_result> (*local)(const topology& t, const run_request& r) = nullptr;

  /// `--save-model PATH`: the trained model, from the weights the actors
  /// sent (null: the job saves none).
  caf::expected<void> (*save_model)(const topology& t, const job_result& result,
                                    const std::string& path) = nullptr;
  /// `baton predict` and `compare --predict`: a variant of its catalogue
  /// (`q.name`) as the cost model's strategy, its model profiled with
  /// `profiles` (costing.hpp; null: the job is not predicted).
  caf::expected<costed_strategy> (*cost)(const cost_request& q, cost_profiles& profiles) = nullptr;

  // -- data --------------------------------------------------------------------
  /// The roles its plans name (the source, which every mode's plan may
  /// name, is the registry's): a node spawns them by name.
  std::vector<role_type> roles;
  /// Its rows of `baton compare`'s and `baton predict`'s catalogue, in
  /// their default order (none: not compared, as transfer).
  std::vector<strategy_variant> variants;
  /// `--baseline separate` applies: `local` runs it.
  bool separate_baseline = false;
  /// It starts from a pretrained backbone: a missing one is refused, or
  /// pre-trained first with backbone.pretrain.if_missing: pretrain
  /// (ensure_pretrained, before anything runs).
  bool starts_pretrained = false;
  /// `--trace`: its actors record their schedule.
  bool traces = false;

  /// The value of `job:`.
  const std::string& name() const { return schema.name; }
};

} // namespace modes
} // namespace baton::actors
