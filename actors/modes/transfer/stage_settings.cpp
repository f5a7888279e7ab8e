#include "actors/modes/transfer/stage_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

std::string to_yaml(const stage_settings& x) {
  return write_yaml(x);
}

caf::expected<stage_settings> parse_stage_settings(const std::string& yaml) {
  return read_yaml<stage_settings>(yaml, "stage");
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
