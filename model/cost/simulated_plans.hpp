#pragma once

// From a strategy (model/cost/cost_model.hpp: the settings of every
// strategy baton compare and predict know) to the plan the simulator runs
// (model/cost/simulator.hpp): its actors placed on the hosts as the modes'
// plans place them (actors/modes/<mode>/plan.cpp: worker w on host w, ps
// and IST shard s on host s % W, a pipeline's stage replicas one per host
// in stage order), each with its step's program in the schedule the runtime
// applies. Built from the same settings as the modes' plans, not from a
// job_plan object: the plan holds actors and edges but not the per-message
// sizes and compute times a simulation needs. docs/cost-model.md ("The
// simulation").

#include "model/cost/cost_model.hpp"
#include "model/cost/simulator.hpp"

namespace baton::model::cost {

/// The simulated plan of `s` for `w` on `c`. The hosts: one machine of
/// c.shared_cores cores shared by every host when they are emulated on one
/// machine (shared_cores > 0), else a machine per host with a core per actor
/// on it (the calibrated co-location slowdown still applies). Throws
/// model::error as predict does.
simulated_plan simulated_plan_of(const workload& w, const cluster& c, const strategy& s,
                                 const runtime_costs& runtime);

/// The prediction of `s` from its simulated plan: the step, its split and
/// the wire bytes simulated; the evaluation per step, samples per step and
/// steps per epoch as predict has them (the evaluation is not simulated).
prediction simulate_prediction(const workload& w, const cluster& c, const strategy& s,
                               const runtime_costs& runtime);

} // namespace baton::model::cost
