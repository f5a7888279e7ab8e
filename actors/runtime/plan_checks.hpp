#pragma once

// The runtime's steps over a job's plan, made once by its mode: what the
// topology's cluster asks of it, done and checked on the plan (its actors,
// edges and threads) and not on the mode that made it: the nodes its
// actors run on, the thread budgets they share, the actors and edges its
// faults name.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace runtime {

/// The machine's hardware threads (at least 1).
int32_t cores();

/// The steps over `plan`, the plan of `t`'s job, in one, before it runs:
/// the budgets runtime.compute_threads asks kept as asked; the actors
/// placed on `t`'s nodes (place_round_robin); the thread budgets left unset
/// set to this machine's share (set_thread_budgets: the same share wherever
/// an actor runs); `t`'s faults checked against its actors and edges
/// (check_faults, whose error it returns).
caf::error settle_plan(job_plan& plan, const topology& t);

/// Gives every actor of `plan` a node of `nodes` (their names, in order), as
/// the plan's order says: an actor on one of them stays there; an actor
/// placed `with` another (planned_actor::with) goes where that one goes;
/// every other actor takes the node of its slot, round-robin over `nodes`.
/// Each actor not placed `with` another has a slot, placed by hand or not,
/// so that placing one actor moves no other; with N nodes the first N
/// actors with a slot land on different nodes. Without nodes (an
/// embedded run) every actor runs in this process ("").
void place_round_robin(job_plan& plan, const std::vector<std::string>& nodes);

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
