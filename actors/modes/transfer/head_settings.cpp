#include "actors/modes/transfer/head_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

std::string to_yaml(const head_settings& x) {
  return write_yaml(x);
}

caf::expected<head_settings> parse_head_settings(const std::string& yaml) {
  return read_yaml<head_settings>(yaml, "head");
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
