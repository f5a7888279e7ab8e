#include "actors/modes/transfer/head_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

std::string to_yaml(const head_role_spec& x) {
  return write_yaml(x);
}

caf::expected<head_role_spec> parse_head_spec(const std::string& yaml) {
  return read_yaml<head_role_spec>(yaml, "head");
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
