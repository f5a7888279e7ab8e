#pragma once

// Carrying out the faults the injector (fault_injector.hpp) fires, the one
// part of fault injection that sends: chaos's throw goes to the actor, a
// node fault to the node's spawner, which kills or stops its process.

#include <cstdint>

#include <caf/blocking_actor.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_nodes.hpp"
#include "actors/runtime/job_pass.hpp"

namespace baton::actors {
inline namespace runtime {

/// Sends fault `f`, fired at the job's step `step`, through `self`: a throw
/// to its actor in `pass`, a kill or stop to its node's spawner in `nodes`.
/// Logged; a fault whose actor or node is gone is dropped.
void send_fault(caf::blocking_actor* self, const fault_spec& f, job_pass& pass,
                const job_nodes& nodes, int64_t step);

} // namespace runtime
} // namespace baton::actors
