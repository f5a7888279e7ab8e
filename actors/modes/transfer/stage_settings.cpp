#include "actors/modes/transfer/stage_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

std::string to_yaml(const stage_spec& x) {
  return write_yaml(x);
}

caf::expected<stage_spec> parse_stage_spec(const std::string& yaml) {
  return read_yaml<stage_spec>(yaml, "stage");
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
