#pragma once

// The coordinator's decisions after a failure, as functions of plain data
// (no actor system, no clock: the time is passed in): the error code of an
// actor's failure message, why a run cannot recover a lost node and how to
// make it, an error a restart would meet again, and how long a failure took
// to be detected. The coordinator logs, stops the pass and restarts.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/fault_injector.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/liveness.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

/// The code of an actor's failure message (failure_atom): a code of baton's
/// errc; anything else (none, a code this build does not know) is
/// actor_failed, so that a failure never reads as no error.
errc failure_code(uint8_t code);

/// Why a run that does not recover could not, and how to make it survive a
/// lost node (docs/faults-and-recovery.md): the run refuses to start again
/// from the initial weights, which would throw away the work done without
/// saying so.
std::string no_recovery_hint(const runtime_spec& runtime);

/// An error `failure` of actor `target` at its step `step` that no injected
/// fault explains, at the same step of the same actor as one before a
/// restart: a restart would meet it again, so the run ends with it (and its
/// code). None when it does not recur (it is remembered by `faults`).
caf::error recurring_failure(const caf::error& failure, const std::string& target,
                             int64_t step, fault_injector& faults);

/// Sets `f`'s detection latency when baton did not inject it: a lost node
/// since its last heartbeat or report, a stall since the job last advanced
/// (both from `live`), detected at `detected`; else it stays unknown.
void measure_detection(fault_record& f, const liveness& live,
                       std::chrono::steady_clock::time_point detected);

} // namespace runtime
} // namespace baton::actors
