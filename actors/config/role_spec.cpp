#include "actors/config/role_spec.hpp"

#include "actors/config/role_spec_yaml.hpp"
#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace config {

std::string with_run(const std::string& settings, const run_settings& run) {
  auto n = YAML::Load(settings);
  n["run"] = to_node(run);
  return dump(n);
}

std::string to_yaml(const source_spec& x) {
  return write_yaml(x);
}

caf::expected<source_spec> parse_source_spec(const std::string& yaml) {
  return read_yaml<source_spec>(yaml, "source");
}

model::model_spec decode_model(const YAML::Node& n) {
  return from_node<model::model_spec>(n, "model");
}

model::optimizer_spec decode_optimizer(const YAML::Node& n) {
  return from_node<model::optimizer_spec>(n, "optimizer");
}

model::task decode_task(const YAML::Node& n) {
  return from_node<model::task>(n, "task");
}

namespace {

/// The settings of a role that is trainable, `run:` alone.
struct trainable_run {
  recovery_spec recovery;
};

template <class Inspector>
void inspect(Inspector& f, trainable_run& x) {
  inspect_run(f, x.recovery);
}

} // namespace

recovery_spec decode_trainable_recovery(const YAML::Node& run) {
  YAML::Node settings(YAML::NodeType::Map);
  if (run)
    settings["run"] = run;
  return from_node<trainable_run>(settings, "run").recovery;
}

} // namespace config
} // namespace baton::actors
