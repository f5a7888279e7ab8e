// The settings codec of the data-parallel parameter shard (its field list:
// shard_settings.hpp).

#include "actors/modes/data_parallel/shard_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

std::string to_yaml(const shard_settings& x) {
  return write_yaml(x);
}

caf::expected<shard_settings> parse_shard_settings(const std::string& yaml) {
  return read_yaml<shard_settings>(yaml, "data-parallel shard");
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
