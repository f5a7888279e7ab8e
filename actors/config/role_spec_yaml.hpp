#pragma once

// Node-level access to the settings codec (actors/config/yaml_codec.hpp)
// for settings read piece by piece from a YAML node rather than through a
// field list of their own: a model, an optimizer, a task, the `run:` of a
// trainable role. Readers throw detail::config_error or std::exception;
// parse_role_yaml turns that into errc::bad_config.

#include <exception>
#include <string>

#include <caf/expected.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/config/role_spec.hpp"
#include "actors/config/yaml_codec.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace config {

/// `x` as a YAML node (to_node).
template <class T>
YAML::Node encode(const T& x) {
  return to_node(x);
}

/// The model of the node `n`, read strictly.
model::model_spec decode_model(const YAML::Node& n);
/// The optimizer of the node `n`, read strictly.
model::optimizer_spec decode_optimizer(const YAML::Node& n);
/// The task of the node `n`, read strictly (make_task's checks).
model::task decode_task(const YAML::Node& n);

/// The recovery of a trainable role from its settings' `run:` node
/// (absent: none), read as inspect_run reads it.
recovery_spec decode_trainable_recovery(const YAML::Node& run);

/// A mode's role settings parsed strictly: decode(YAML::Load(yaml)), any
/// exception turned into errc::bad_config "unreadable <what> spec: ...".
template <class Decode>
auto parse_role_yaml(Decode decode, const std::string& yaml, const std::string& what)
  -> caf::expected<decltype(decode(YAML::Node{}))> {
  try {
    return decode(YAML::Load(yaml));
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, "unreadable " + what + " spec: " + e.what());
  }
}

} // namespace config
} // namespace baton::actors
