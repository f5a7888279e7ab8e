#pragma once

// The settings of a trainable pipeline stage (role `pipeline_stage`), listed
// once for both directions of their YAML (inspect,
// actors/config/yaml_codec.hpp).

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// A trainable pipeline stage: layers [begin, end) of the backbone followed by
/// its classifier, trained under `schedule`.
struct stage_settings {
  model::model_spec backbone;
  int64_t classes = 10;      ///< classifier outputs (the task's classes)
  std::string task;          ///< the task whose labels the last stage trains on
  int64_t begin = 0;
  int64_t end = 0;
  bool first = false;        ///< receives samples (no input gradient)
  bool last = false;         ///< computes the loss
  std::string schedule = "1f1b"; ///< gpipe | 1f1b-flush | 1f1b | 1f1b-dynamic
  model::optimizer_spec optimizer;
  /// The optimizer's schedule over the run (model::lr_at): the stage's steps
  /// per epoch (a minibatch's under a flush schedule or replicated, a
  /// microbatch's under 1f1b) and the epochs; 0: a constant lr.
  int64_t steps_per_epoch = 0;
  int32_t epochs = 0;
  /// A pretrained backbone (`backbone.checkpoint`: `baton pretrain`'s
  /// whole-model checkpoint): every layer but the classifier starts from
  /// it; "" for the seeded weights.
  std::string checkpoint;
  int32_t window = 4;
  int32_t threads = 1;
  int32_t progress_every = 20;
  int32_t replica = 0;           ///< index in the stage's replica group
  int32_t replicas = 1;          ///< size of the replica group
  int32_t upstream_replicas = 1; ///< senders of its microbatches (copies of each control)
  int32_t max_in_flight = 0;     ///< forwards without backward (PipeDream's NOAM); 0: no limit
  bool vertical_sync = false;    ///< forward with the version the input stage chose
  /// weight_gradient: next (model/core/stage_trainer.hpp): the next stage
  /// computes the weight gradient of this stage's last layer; this stage
  /// computes that of the previous stage's last layer.
  bool hands_on_weight_gradient = false;
  bool takes_weight_gradient = false;
  bool trace = false;            ///< record the schedule for --trace: `run.trace`
  recovery_settings recovery;        ///< `run.recovery`
};

/// Its fields; 0 <= begin < end, 0 <= replica < replicas, a known schedule.
template <class Inspector>
void inspect(Inspector& f, stage_settings& x) {
  f.field("backbone", x.backbone);
  f.field("classes", x.classes).at_least(1);
  f.field("task", x.task);
  f.field("begin", x.begin).at_least(0);
  f.field("end", x.end);
  f.expect("end", x.end > x.begin, "greater than begin");
  f.field("first", x.first);
  f.field("last", x.last);
  f.field("schedule", x.schedule).one_of({"gpipe", "1f1b-flush", "1f1b", "1f1b-dynamic"});
  f.field("optimizer", x.optimizer);
  f.optional_field("steps_per_epoch", x.steps_per_epoch).at_least(0);
  f.optional_field("epochs", x.epochs).at_least(0);
  f.field("checkpoint", x.checkpoint);
  f.field("window", x.window).at_least(1);
  f.field("threads", x.threads).at_least(1);
  f.field("progress_every", x.progress_every);
  f.field("replica", x.replica).at_least(0);
  f.field("replicas", x.replicas).at_least(1);
  f.expect("replica", x.replica < x.replicas, "less than replicas");
  f.field("upstream_replicas", x.upstream_replicas).at_least(1);
  f.field("max_in_flight", x.max_in_flight).at_least(0);
  f.field("vertical_sync", x.vertical_sync);
  f.field("hands_on_weight_gradient", x.hands_on_weight_gradient);
  f.expect("hands_on_weight_gradient", !(x.hands_on_weight_gradient && x.last),
           "false on the last stage");
  f.field("takes_weight_gradient", x.takes_weight_gradient);
  f.expect("takes_weight_gradient", !(x.takes_weight_gradient && x.first),
           "false on the first stage");
  inspect_run(f, x.recovery, x.trace);
}

/// A pipeline stage's settings as YAML.
std::string to_yaml(const stage_settings& x);
/// Parses to_yaml's text of a pipeline stage strictly: errc::bad_config on
/// anything else.
caf::expected<stage_settings> parse_stage_settings(const std::string& yaml);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
