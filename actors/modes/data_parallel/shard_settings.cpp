// The settings codec of the data-parallel parameter shard (its field list:
// shard_settings.hpp).

#include "actors/modes/data_parallel/shard_settings.hpp"

#include "actors/config/yaml_codec.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

std::string to_yaml(const data_parallel_shard_spec& x) {
  return write_yaml(x);
}

caf::expected<data_parallel_shard_spec> parse_data_parallel_shard_spec(const std::string& yaml) {
  return read_yaml<data_parallel_shard_spec>(yaml, "data-parallel shard");
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
