#pragma once

// The YAML codec of job: ist's settings (role_settings.hpp: their field lists),
// for either subnet scheme: S::to_yaml, S::parse_worker_settings and
// S::parse_shard_settings. A scheme's .cpp includes this and instantiates them
// (template struct subnet_scheme<...>): the field lists ask the scheme
// whether a shape fits (S::misfit).

#include <string>

#include "actors/config/yaml_codec.hpp"
#include "actors/modes/ist/subnet_scheme.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

template <class Network>
std::string subnet_scheme<Network>::to_yaml(const worker_settings& x) {
  return write_yaml(x);
}

template <class Network>
std::string subnet_scheme<Network>::to_yaml(const shard_settings& x) {
  return write_yaml(x);
}

template <class Network>
auto subnet_scheme<Network>::parse_worker_settings(const std::string& yaml)
  -> caf::expected<worker_settings> {
  return read_yaml<worker_settings>(yaml, std::string{names.title} + " worker");
}

template <class Network>
auto subnet_scheme<Network>::parse_shard_settings(const std::string& yaml)
  -> caf::expected<shard_settings> {
  return read_yaml<shard_settings>(yaml, std::string{names.title} + " shard");
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
