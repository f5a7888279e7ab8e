#pragma once

// The one list of training modes (mode.hpp) and of the roles their plans
// name. The runtime (actors/runtime/) never includes this file: the caller
// hands it the plan and the role table.

#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/mode.hpp"
#include "actors/roles/role_type.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {

/// Every role a node may spawn: the shared ones and each mode's.
const std::vector<role_type>& all_roles();

/// Every training mode, by the value of `job:`; the first is the default.
const std::vector<mode>& all_modes();

/// The mode named `name` (`job:`), or nullptr.
const mode* find_mode(const std::string& name);

/// load_request_topology with every mode's schema (all_job_schemas()).
caf::expected<topology> load_request_topology(const run_request& r);

/// The plan of `t`'s job (`job:`), made once by its mode, the thread
/// budgets `t` leaves unset set over it (set_thread_budgets), its actors
/// placed on `t`'s nodes (place_round_robin) and `t`'s faults checked
/// against it (check_faults): what the runtime runs.
caf::expected<job_plan> plan_of(const topology& t);

/// Sets the thread budget `t` leaves unset (runtime.compute_threads) to
/// this machine's share for each actor of its plan
/// that computes (actors/runtime/plan_checks.hpp); nothing when the plan
/// cannot be made (plan_of says why).
void derive_thread_budgets(topology& t);

} // namespace modes
} // namespace baton::actors
