#pragma once

// The training modes' topology schemas (each mode's `schema`, mode.hpp), and
// the topology readers with them: what every caller outside the runtime
// uses (the runtime is handed the list). See actors/config/job_schema.hpp.

#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/job_schema.hpp"
#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace modes {

/// Every `job:` value: each mode's schema (mode::schema) in the order of
/// all_modes() (registry.cpp, where it is defined), the default (`job:`
/// absent) first.
const std::vector<job_schema>& all_job_schemas();

// The readers below are defined with the registry too: after
// parsing, the job's plan derives the thread budgets the topology leaves
// unset and checks its faults (the names of trainable actors, the edges),
// as plan_of does.

/// load_topology with all_job_schemas(), checked against the job's plan.
caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides = {});

/// parse_topology with all_job_schemas(), checked against the job's plan.
caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides = {});

/// parse_topology_as with all_job_schemas(), checked against the job's plan.
caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides = {});

/// topology_values with all_job_schemas().
caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides = {});

} // namespace modes
} // namespace baton::actors
