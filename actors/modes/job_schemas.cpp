#include "actors/modes/job_schemas.hpp"

#include "actors/modes/registry.hpp"

namespace baton::actors {
inline namespace modes {

const std::vector<job_schema>& all_job_schemas() {
  static const std::vector<job_schema> jobs = [] {
    std::vector<job_schema> out;
    for (const auto& m : all_modes())
      out.push_back(m.schema);
    return out;
  }();
  return jobs;
}

caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  return load_topology(path, overrides, all_job_schemas());
}

caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides) {
  return parse_topology(yaml_text, name, overrides, all_job_schemas());
}

caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides) {
  return parse_topology_as(yaml_text, path, overrides, all_job_schemas());
}

caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides) {
  return topology_values(yaml_text, name, overrides, all_job_schemas());
}

} // namespace modes
} // namespace baton::actors
