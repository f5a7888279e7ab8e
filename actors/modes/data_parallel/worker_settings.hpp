#pragma once

// The settings of a data-parallel worker (role `data_parallel_worker`),
// listed once for both directions of their YAML (inspect,
// actors/config/yaml_codec.hpp); its data part is a source's settings.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "model/core/specs.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// A worker's settings (role `data_parallel_worker`).
struct worker_settings {
  int32_t worker = 0;              ///< its index on the ring
  int32_t workers = 1;             ///< W
  model::model_spec model;         ///< mlp | convnet | resnet18; classes = the task's
  model::task task;                ///< the labels it trains on
  /// The data as a source would read it: dataset, limits, the per-worker
  /// batch size, epochs and the order's seed (plan.batch_size, .epochs, .seed).
  source_settings data;
  model::optimizer_spec optimizer; ///< lr: the schedule's base lr
  bool linear_scaling = false;     ///< lr x W x batch_size / base_batch
  int64_t base_batch = 256;
  double warmup_epochs = 0;        ///< linear warmup to the scaled lr
  double bucket_mb = 25;           ///< gradient bucket cap (MiB)
  /// ring: put each bucket on the ring as the backward finishes it (true),
  /// or every bucket after the backward (false); the same sums either way.
  bool overlap = true;
  /// ring (all-reduce, the worker steps) | ps (pushes to the shards, pulls
  /// their new slices: ps_exchange.hpp; no local step).
  std::string exchange = "ring";
  int32_t shards = 1;              ///< ps: S shard actors
  int32_t max_staleness = 0;       ///< ps: steps ahead of the slowest worker (0: BSP)
  /// 0: every step's gradients all-reduced. L >= 1: local SGD, the
  /// trainable weights averaged over the ring after every L steps and at
  /// every epoch end (model::data_parallel_settings::sync_every).
  int32_t sync_every = 0;
  std::string freeze_up_to;        ///< the last layer of a fixed frozen prefix ("" for none)
  /// Adaptive freezing (AutoFreeze) when not empty: each freezable group's
  /// last layer, in model order; exclusive with freeze_up_to and sync_every.
  std::vector<std::string> freeze_groups;
  model::adaptive_freeze_options adaptive;
  bool cache = false;              ///< the frozen prefix's output cached per sample
  double cache_mb = 256;           ///< the cache's budget (MiB)
  /// Rows of the frozen prefix's canonical blocks (frozen_features).
  int64_t feature_block = model::default_feature_block;
  /// A pretrained backbone (`baton pretrain`'s whole-model checkpoint): every
  /// layer but the classifier "fc2" starts from it; "" for the seeded weights.
  std::string checkpoint;
  int64_t eval_batch = 256;        ///< test samples per evaluation batch (worker 0)
  int32_t threads = 1;             ///< torch threads of this actor
  int32_t progress_every = 20;     ///< steps between progress messages (worker 0)
  /// `run.recovery`: checkpoints at global steps, the step to restore
  /// (restore_step), the step it throws before (a fault).
  recovery_settings recovery;
};

/// Fails unless `model` is one a worker holds whole (mlp, ist_mlp, convnet,
/// resnet18, torchscript with its path) with positive classes and
/// in_channels; the shard's too.
template <class Inspector>
void expect_worker_model(Inspector& f, const model::model_spec& model) {
  f.expect("model.name",
           model.name == "mlp" || model.name == "ist_mlp" || model.name == "convnet" ||
             model.name == "resnet18" || model.name == "torchscript",
           "one of: mlp, ist_mlp, convnet, resnet18, torchscript");
  f.expect("model.path", model.name != "torchscript" || !model.path.empty(),
           "a TorchScript file for model torchscript");
  f.expect("model.classes", model.classes >= 1, "at least 1");
  f.expect("model.in_channels", model.in_channels >= 1, "at least 1");
}

/// The fields a worker and a shard share after their model: the data, the
/// optimizer (a positive lr) and its schedule (linear_scaling, base_batch,
/// warmup_epochs).
template <class Inspector, class Spec>
void inspect_schedule(Inspector& f, Spec& x) {
  f.field("data", x.data);
  f.field("optimizer", x.optimizer);
  f.expect("optimizer.lr", x.optimizer.lr > 0, "greater than 0");
  f.field("linear_scaling", x.linear_scaling);
  f.field("base_batch", x.base_batch).at_least(1);
  f.field("warmup_epochs", x.warmup_epochs).at_least(0.0);
}

/// `freeze:`: the frozen prefix, adaptive freezing and the cache.
template <class Inspector>
void inspect_freeze(Inspector& f, worker_settings& x) {
  f.field("up_to", x.freeze_up_to);
  f.field("groups", x.freeze_groups);
  f.field("interval", x.adaptive.interval).at_least(1);
  f.field("percentile", x.adaptive.percentile).in(0.0, 100.0);
  f.field("max_frozen", x.adaptive.max_frozen).at_least(-1);
  f.expect("max_frozen", x.adaptive.max_frozen <= static_cast<int32_t>(x.freeze_groups.size()),
           "at most the number of groups");
  f.field("cache", x.cache);
  f.field("cache_mb", x.cache_mb).at_least(0.0);
  f.field("feature_block", x.feature_block).at_least(0);
  f.expect("feature_block", !x.cache || x.feature_block >= 1, "at least 1 with the cache");
}

/// Its fields; 0 <= worker < workers, a worker's model, positive sizes and
/// lr, and adaptive freezing (freeze.groups) without freeze.up_to or
/// local SGD (sync_every).
template <class Inspector>
void inspect(Inspector& f, worker_settings& x) {
  f.field("worker", x.worker).at_least(0);
  f.field("workers", x.workers).at_least(1);
  f.expect("worker", x.worker < x.workers, "less than workers");
  f.field("model", x.model);
  expect_worker_model(f, x.model);
  f.field("task", x.task);
  inspect_schedule(f, x);
  f.field("bucket_mb", x.bucket_mb).above(0.0);
  f.field("overlap", x.overlap);
  f.field("exchange", x.exchange).one_of({"ring", "ps"});
  f.field("shards", x.shards).at_least(1);
  f.field("max_staleness", x.max_staleness).at_least(0);
  f.field("sync_every", x.sync_every).at_least(0);
  f.object("freeze", [&](auto& g) { inspect_freeze(g, x); });
  f.expect("freeze.up_to", x.freeze_groups.empty() || x.freeze_up_to.empty(),
           "empty with adaptive freezing (freeze.groups)");
  f.expect("sync_every", x.freeze_groups.empty() || x.sync_every == 0,
           "0 with adaptive freezing (freeze.groups)");
  f.field("checkpoint", x.checkpoint);
  f.field("eval_batch", x.eval_batch).at_least(1);
  f.field("threads", x.threads).at_least(1);
  f.field("progress_every", x.progress_every).at_least(1);
  inspect_run(f, x.recovery);
}

/// A worker's settings as YAML (the `settings` of its planned actor).
std::string to_yaml(const worker_settings& x);
/// Parses to_yaml's text of a worker strictly: errc::bad_config on anything else.
caf::expected<worker_settings> parse_worker_settings(const std::string& yaml);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
