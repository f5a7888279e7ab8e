#pragma once

// The settings of each actor role, as the coordinator sends them to a node in
// a spawn_request (YAML text in `spec`). A node parses them strictly: a spec
// it cannot read is refused with errc::bad_config, never half-applied.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "model/transfer/feature_cache.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/local.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace config {

/// Checkpoints and injected faults of a trainable actor (head, pipeline
/// stage). See actors/roles/recovery.hpp.
struct recovery_spec {
  std::string checkpoint_dir;   ///< this actor's checkpoints; "" = none
  int32_t checkpoint_every = 0; ///< optimiser steps between checkpoints; 0 = none
  int64_t restore_step = 0;     ///< start from the checkpoint of this step; 0: initial weights
  int64_t throw_at_step = -1;   ///< fault injection: throw before training this step
  int64_t notify_from_step = -1; ///< tell the coordinator of every step from this one on
  /// The run whose checkpoints these are: written into each, and a
  /// checkpoint of another run is never restored (actors/roles/recovery.hpp).
  std::string run_id;
};

/// What the runtime adds to every actor's settings, as the key `run:`, at
/// each spawn: what the plan cannot know (this pass's restore step, the
/// checkpoints and injected faults of a trainable actor, --trace).
struct run_settings {
  recovery_spec recovery; ///< restore_step applies to every role (a source starts there)
  bool trace = false;     ///< record the schedule (pipeline stages)
};

/// The settings `settings` (a YAML map) with `run:` set to `run`.
std::string with_run(const std::string& settings, const run_settings& run);

/// A source: reads a dataset and emits microbatches under a credit window.
struct source_spec {
  std::string dataset = "fashion-mnist"; ///< fashion-mnist | synthetic
  std::string data_dir;
  int64_t train_limit = 0;
  int64_t test_limit = 0;
  int64_t synthetic_train = 4096;
  int64_t synthetic_test = 1024;
  std::vector<int64_t> synthetic_shape{1, 28, 28}; ///< C, H, W of a synthetic sample
  model::batch_plan plan;
  std::vector<model::task> tasks; ///< labels of every task travel with each microbatch
  int32_t window = 4;
  int64_t start_step = 0; ///< first training step to emit: `run.recovery.restore_step`
};

/// A frozen stage: layers [begin, end) of the backbone.
struct stage_spec {
  model::model_spec backbone;
  std::string checkpoint; ///< whole-backbone checkpoint; empty = initial weights
  int64_t begin = 0;
  int64_t end = 0;
  int32_t window = 4;
  int32_t threads = 1;    ///< torch threads of this actor
  /// How it computes and keeps its features (`backbone.cache`, `cache_mb`,
  /// `feature_block`); a cache only in a stage that holds the whole backbone.
  model::feature_cache_spec features;
};

/// A trainable head.
struct head_role_spec {
  model::head_spec head;
  int32_t threads = 1;
  int32_t progress_every = 20;
  recovery_spec recovery; ///< `run.recovery`
};

/// A trainable pipeline stage: layers [begin, end) of the backbone followed by
/// its classifier, trained under `schedule`.
struct pipeline_stage_spec {
  model::model_spec backbone;
  int64_t classes = 10;      ///< classifier outputs (the task's classes)
  std::string task;          ///< the task whose labels the last stage trains on
  int64_t begin = 0;
  int64_t end = 0;
  bool first = false;        ///< receives samples (no input gradient)
  bool last = false;         ///< computes the loss
  std::string schedule = "1f1b"; ///< gpipe | 1f1b-flush | 1f1b | 1f1b-dynamic
  model::optimizer_spec optimizer;
  int32_t window = 4;
  int32_t threads = 1;
  int32_t progress_every = 20;
  int32_t replica = 0;           ///< index in the stage's replica group
  int32_t replicas = 1;          ///< size of the replica group
  int32_t upstream_replicas = 1; ///< senders of its microbatches (copies of each control)
  int32_t max_in_flight = 0;     ///< forwards without backward (PipeDream's NOAM); 0: no limit
  bool vertical_sync = false;    ///< forward with the version the input stage chose
  bool trace = false;            ///< record the schedule for --trace: `run.trace`
  recovery_spec recovery;        ///< `run.recovery`
};

std::string to_yaml(const source_spec& x);
std::string to_yaml(const pipeline_stage_spec& x);
caf::expected<pipeline_stage_spec> parse_pipeline_stage_spec(const std::string& yaml);
std::string to_yaml(const stage_spec& x);
std::string to_yaml(const head_role_spec& x);

caf::expected<source_spec> parse_source_spec(const std::string& yaml);
caf::expected<stage_spec> parse_stage_spec(const std::string& yaml);
caf::expected<head_role_spec> parse_head_spec(const std::string& yaml);

} // namespace config
} // namespace baton::actors
