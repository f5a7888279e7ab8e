#include "actors/modes/pipeline/stage_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace pipeline {

std::string to_yaml(const pipeline_stage_spec& x) {
  return write_yaml(x);
}

caf::expected<pipeline_stage_spec> parse_pipeline_stage_spec(const std::string& yaml) {
  return read_yaml<pipeline_stage_spec>(yaml, "pipeline stage");
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
