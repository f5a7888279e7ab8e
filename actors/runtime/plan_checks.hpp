#pragma once

// What a topology's cluster asks of a job's plan, checked on the plan (its
// actors, edges and threads) and not on the mode that made it: the actors
// and edges its faults name, and the thread budgets its actors share.

#include <cstdint>
#include <vector>

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace runtime {

/// Refuses a fault that names what `plan` does not have: a `throw` of an
/// actor that is not trainable, a `delay` or `drop` on an edge that carries
/// no microbatches (a data edge). errc::bad_config naming the fault's
/// `where` (file:line, or the --fault) and what the plan has.
caf::error check_faults(const std::vector<fault_spec>& faults, const job_plan& plan);

/// The actors of `plan` that compute (planned_actor::threads > 0).
int32_t compute_actors(const job_plan& plan);

/// Sets the thread budget `r` leaves unset (compute_threads) to an equal
/// share of `cores` for each of `actors` actors that compute, at
/// least 1: the default job fits the machine. Over node processes each node
/// runs fewer actors than the job, so the share never asks more than this
/// machine has.
void derive_thread_budgets(runtime_spec& r, int32_t actors, int32_t cores);

/// The thread budgets of a plan, a step over it (no re-plan): every actor
/// that computes and whose budget was not asked (planned_actor::
/// threads_asked) and whose settings hold `threads:` gets an equal share of
/// `cores` over the plan's computing actors, at least 1, in its `threads`
/// and in its settings.
void set_thread_budgets(job_plan& plan, int32_t cores);

} // namespace runtime
} // namespace baton::actors
