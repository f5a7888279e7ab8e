#pragma once

// The settings of a trainable transfer head (role `head`), listed once for
// both directions of their YAML (inspect, actors/config/yaml_codec.hpp).

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// A trainable head.
struct head_settings {
  model::head_spec head;
  /// The optimizer's schedule over the run (model::lr_at): the head's steps
  /// per epoch (one a minibatch) and the epochs; 0: a constant lr.
  int64_t steps_per_epoch = 0;
  int32_t epochs = 0;
  int32_t threads = 1;
  int32_t progress_every = 20;
  recovery_settings recovery; ///< `run.recovery`
  /// The replicas of the frozen backbone (`backbone.replicas`) whose
  /// features it takes, in the source's order (merged_input.hpp).
  int32_t replicas = 1;
};

/// The head's name, task, model and optimizer, then its own fields.
template <class Inspector>
void inspect(Inspector& f, head_settings& x) {
  f.field("name", x.head.name);
  f.field("task", x.head.task_def);
  f.field("model", x.head.model);
  f.field("optimizer", x.head.optimizer);
  f.optional_field("steps_per_epoch", x.steps_per_epoch).at_least(0);
  f.optional_field("epochs", x.epochs).at_least(0);
  f.field("threads", x.threads).at_least(1);
  f.field("progress_every", x.progress_every).at_least(1);
  inspect_run(f, x.recovery);
  f.optional_field("replicas", x.replicas).at_least(1);
}

/// A head's settings as YAML.
std::string to_yaml(const head_settings& x);
/// Parses to_yaml's text of a head strictly: errc::bad_config on anything else.
caf::expected<head_settings> parse_head_settings(const std::string& yaml);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
