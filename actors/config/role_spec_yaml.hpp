#pragma once

// The YAML pieces of the role settings codec (role_spec.cpp) that a mode's
// own role settings nest: a model, an optimizer, a task. Decoders throw
// YAML::Exception or std::exception; the spec parsers turn that into
// errc::bad_config.

#include <exception>
#include <string>

#include <caf/expected.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/config/role_spec.hpp"
#include "messages/errc.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"

namespace baton::actors {
inline namespace config {

YAML::Node encode(const model::model_spec& x);
YAML::Node encode(const model::optimizer_spec& x);
YAML::Node encode(const model::task& x);

model::model_spec decode_model(const YAML::Node& n);
model::optimizer_spec decode_optimizer(const YAML::Node& n);
model::task decode_task(const YAML::Node& n);

/// `run:` of a role's settings (what with_run adds), for a mode's own roles.
YAML::Node encode(const run_settings& x);
/// The recovery of a trainable role from its settings' `run:` node
/// (absent: none); a restore step without a checkpoint_dir is refused.
recovery_spec decode_trainable_recovery(const YAML::Node& run);

/// `n` as text, doubles with all 17 digits (a round trip keeps every bit).
std::string dump(const YAML::Node& n);

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
