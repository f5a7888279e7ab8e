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

/// The one list of modes, made once: each mode, the schemas the topology
/// parser is handed (the modes' own, in their order) and every role a node
/// may spawn (the shared ones and each mode's). A run reads all three from
/// here in one call.
struct mode_registry {
  std::vector<mode> modes; ///< by the value of `job:`; the first is the default
  std::vector<job_schema> schemas;
  std::vector<role_type> roles;

  /// The mode named `name` (`job:`), or nullptr.
  const mode* find(const std::string& name) const {
    for (const auto& m : modes)
      if (m.name() == name)
        return &m;
    return nullptr;
  }
};

/// The registry: every mode, schema and role.
const mode_registry& registry();

/// Every role a node may spawn: the shared ones and each mode's.
const std::vector<role_type>& all_roles();

/// Whether the actors of role `role` train (role_type::trains); false for
/// a role no mode registers.
bool role_trains(const std::string& role);

/// Every training mode, by the value of `job:`; the first is the default.
const std::vector<mode>& all_modes();

/// The mode named `name` (`job:`), or nullptr.
const mode* find_mode(const std::string& name);

/// Loads the request's topology (file or built-in default) with overrides
/// (actors/modes/run.cpp): read once, parsed once, no plan made. With
/// --resume DIR: the run recorded in DIR (request_record), refused with a
/// list of the differences when its training settings are not the recorded
/// run's.
caf::expected<topology> load_request_topology(const run_request& r);

/// The plan of `t`'s job (`job:`), made once by its mode, the thread
/// budgets `t` leaves unset set over it (set_thread_budgets), its actors
/// placed on `t`'s nodes (place_round_robin) and `t`'s faults checked
/// against it (check_faults): what the runtime runs.
caf::expected<job_plan> plan_of(const topology& t);

/// The same, by `job`, the mode of `t.job` its caller has found already
/// (actors/modes/run.cpp: a run's one plan).
caf::expected<job_plan> plan_of(const mode& job, const topology& t);

/// Sets the thread budget `t` leaves unset (runtime.compute_threads) to
/// this machine's share for each actor of its plan
/// that computes (actors/runtime/plan_checks.hpp); nothing when the plan
/// cannot be made (plan_of says why).
void derive_thread_budgets(topology& t);

/// The cost model's inputs for the variant `q.name` of `q.t`'s job, by its
/// mode's cost (mode::cost, costing.hpp); errc::bad_config for a job
/// without one, naming those with one.
caf::expected<costed_strategy> cost_of(const cost_request& q, cost_profiles& profiles);

} // namespace modes
} // namespace baton::actors
