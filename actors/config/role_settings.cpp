#include "actors/config/role_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace config {

std::string with_run(const std::string& settings, const run_settings& run) {
  auto n = YAML::Load(settings);
  n["run"] = to_node(run);
  return dump(n);
}

std::string to_yaml(const source_settings& x) {
  return write_yaml(x);
}

caf::expected<source_settings> parse_source_settings(const std::string& yaml) {
  return read_yaml<source_settings>(yaml, "source");
}

} // namespace config
} // namespace baton::actors
