#pragma once

// The settings every actor role shares, as the coordinator sends them to a
// node in a spawn_request (YAML text in `spec`): a source's, and the `run:`
// the runtime adds to every role's at each spawn. Each struct lists its
// fields once (inspect, actors/config/yaml_codec.hpp) for both directions; a
// node reads them strictly: settings it cannot read are refused with
// errc::bad_config, never half-applied. A mode's own roles keep theirs in
// its folder (actors/modes/<mode>/).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/model_fields.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace config {

/// Checkpoints and injected faults of a trainable actor (head, pipeline
/// stage). See actors/roles/checkpointing.hpp.
struct recovery_settings {
  std::string checkpoint_dir;   ///< this actor's checkpoints; "" = none
  int32_t checkpoint_every = 0; ///< optimiser steps between checkpoints; 0 = none
  int64_t restore_step = 0;     ///< start from the checkpoint of this step; 0: initial weights
  int64_t throw_at_step = -1;   ///< fault injection: throw before training this step
  int64_t notify_from_step = -1; ///< tell the coordinator of every step from this one on
  /// The run whose checkpoints these are: written into each, and a
  /// checkpoint of another run is never restored (actors/roles/checkpointing.hpp).
  std::string run_id;
  /// Send the weights after every epoch too (tensor_set "epoch_weights"):
  /// the coordinator keeps the best epoch's for --save-model (save: best,
  /// actors/runtime/best_epochs.hpp), the state a failure could cost.
  bool epoch_weights = false;
};

/// Its fields; checkpoints need a checkpoint_dir.
template <class Inspector>
void inspect(Inspector& f, recovery_settings& x) {
  f.field("checkpoint_dir", x.checkpoint_dir);
  f.field("checkpoint_every", x.checkpoint_every).at_least(0);
  f.field("restore_step", x.restore_step).at_least(0);
  f.field("throw_at_step", x.throw_at_step);
  f.field("notify_from_step", x.notify_from_step);
  f.field("run_id", x.run_id);
  f.optional_field("epoch_weights", x.epoch_weights);
  f.expect("checkpoint_dir", x.checkpoint_every == 0 || !x.checkpoint_dir.empty(),
           "a directory when checkpoint_every is positive");
}

/// What the runtime adds to every actor's settings, as the key `run:`, at
/// each spawn: what the plan cannot know (this pass's restore step, the
/// checkpoints and injected faults of a trainable actor, --trace).
struct run_settings {
  recovery_settings recovery; ///< restore_step applies to every role (a source starts there)
  bool trace = false;     ///< record the schedule (pipeline stages)
};

/// recovery, trace.
template <class Inspector>
void inspect(Inspector& f, run_settings& x) {
  f.field("recovery", x.recovery);
  f.field("trace", x.trace);
}

/// The `run:` of a trainable role's settings (absent: nothing to restore, no
/// checkpoints, no trace), read into `recovery` and `trace`; restoring a
/// step needs a checkpoint_dir.
template <class Inspector>
void inspect_run(Inspector& f, recovery_settings& recovery, bool& trace) {
  f.optional_field("run", [&] { return run_settings{recovery, trace}; },
                   [&](const run_settings& run) {
                     recovery = run.recovery;
                     trace = run.trace;
                   });
  f.expect("run.recovery.checkpoint_dir",
           recovery.restore_step == 0 || !recovery.checkpoint_dir.empty(),
           "a directory to restore step " + std::to_string(recovery.restore_step) + " from");
}

/// inspect_run of a role that records no schedule (`trace` written false).
template <class Inspector>
void inspect_run(Inspector& f, recovery_settings& recovery) {
  bool trace = false;
  inspect_run(f, recovery, trace);
}

/// The settings `settings` (a YAML map) with `run:` set to `run`.
std::string with_run(const std::string& settings, const run_settings& run);

/// A source: reads a dataset and emits microbatches under a credit window.
struct source_settings {
  model::data_spec data; ///< what it reads (the topology's `data:`)
  model::batch_plan plan;
  std::vector<model::task> tasks; ///< labels of every task travel with each microbatch
  int32_t window = 4;
  int64_t start_step = 0; ///< first training step to emit: `run.recovery.restore_step`
  /// The training samples the plan counted a learning-rate schedule's steps
  /// from (actors/modes/schedule_length.hpp); the source refuses to start
  /// on another number. 0: not checked (no schedule).
  int64_t train_samples = 0;
  /// Every microbatch, evaluation ones too, to its receivers in turns by id
  /// (flow::dealing::turns: replicas of a frozen backbone); false: the
  /// replica rule of a trained stage (training microbatch i of a step to
  /// replica i % n, evaluation to replica 0).
  bool deal_in_turns = false;
};

/// Its fields, the batch plan's among them (batch_size, microbatches,
/// epochs, seed), and start_step as `run.recovery.restore_step`.
template <class Inspector>
void inspect(Inspector& f, source_settings& x) {
  f.field("data", x.data);
  f.field("batch_size", x.plan.batch_size).at_least(1);
  f.field("microbatches", x.plan.microbatches).at_least(1);
  f.field("epochs", x.plan.epochs);
  f.field("seed", x.plan.seed);
  f.field("tasks", x.tasks);
  f.field("window", x.window).at_least(1);
  f.optional_field("train_samples", x.train_samples).at_least(0);
  f.optional_field("deal_in_turns", x.deal_in_turns);
  f.optional_field("run",
                   [&] {
                     run_settings run;
                     run.recovery.restore_step = x.start_step;
                     return run;
                   },
                   [&](const run_settings& run) { x.start_step = run.recovery.restore_step; });
}

/// A source's settings as YAML.
std::string to_yaml(const source_settings& x);
/// Parses to_yaml's text of a source strictly: errc::bad_config on anything else.
caf::expected<source_settings> parse_source_settings(const std::string& yaml);

} // namespace config
} // namespace baton::actors
