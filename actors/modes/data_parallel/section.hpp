#pragma once

// The topology of job: data-parallel, as its mode reads it: the
// `data_parallel:` section (workers, exchange, gradient buckets, model,
// optimizer, placement), its worker actors' names, edges and placement.
// The section is kept in topology::mode_spec as a
// section_spec (section_of reads it); the model
// it names replaces backbone.model.

#include <string>
#include <vector>

#include "actors/modes/strategy_variant.hpp"
#include "actors/config/job_schema.hpp"
#include "actors/modes/worker_group.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The most workers a data-parallel job may have (each is an actor with a
/// whole model replica).
inline constexpr int32_t max_workers = 64;

/// The most parameter shards (exchange: ps) a data-parallel job may have.
inline constexpr int32_t max_shards = 64;

/// `data_parallel.freeze`: the prefix of the model that runs forward only
/// (no backward, no gradient traffic), fixed or chosen by AutoFreeze, and
/// the feature cache of its output (freeze_section.hpp reads it).
struct freeze_spec {
  /// "none" (nothing frozen), "fixed" (the layers up to `up_to`) or
  /// "adaptive" (AutoFreeze over `groups`).
  std::string policy = "none";
  std::string up_to;                       ///< fixed: the last frozen layer
  std::vector<std::string> groups;         ///< adaptive: each group's last layer, in order
  model::adaptive_freeze_options adaptive; ///< adaptive: interval, percentile, max_frozen
  bool cache = false;                      ///< cache: memory: the prefix's rows per sample
  double cache_mb = 256;                   ///< the cache's budget per worker (MiB)
};

/// The `data_parallel:` section, parsed and validated.
struct section_spec {
  int32_t workers = 2;            ///< W: worker actors, each with the whole model
  std::string exchange = "ring";  ///< ring (all-reduce) | ps (parameter shards)
  /// ps: S parameter shard actors, each owning a contiguous, byte-balanced
  /// range of the flat parameters (model::shard_ranges).
  int32_t shards = 1;
  /// ps: bounded staleness s, a worker at most s steps ahead of the slowest
  /// (ps_exchange.hpp: may_compute); 0 is BSP.
  int32_t max_staleness = 0;
  double bucket_mb = 25;          ///< gradient bucket cap in MiB (DDP's bucket_cap_mb)
  /// ring: a bucket's all-reduce starts as soon as the backward produced
  /// its gradients (DDP's overlap); false: once the whole backward is done.
  bool overlap = true;
  /// 0: every step's gradients all-reduced. L >= 1: local SGD, the
  /// trainable weights averaged after every L steps and at every epoch end.
  int32_t sync_every = 0;
  freeze_spec freeze;         ///< the frozen prefix and its cache
  /// The task the workers train: `data_parallel.task`, else the workload's
  /// `task` (a pretrained backbone may have learnt another).
  std::string task;
  /// optimizer.lr_scaling: "linear" multiplies the lr by W x batch_size /
  /// base_batch (Goyal et al.); "none" keeps it.
  std::string lr_scaling = "none";
  int64_t base_batch = 256;       ///< optimizer.base_batch: the batch the lr is for
  double warmup_epochs = 0;       ///< optimizer.warmup_epochs: linear ramp to the target lr
  /// `data_parallel.optimizer` (lr, momentum, weight_decay), over the
  /// defaults of backbone.pretrain.optimizer.
  model::optimizer_spec optimizer;
  /// The node of each worker: as `nodes` lists them, else filled by
  /// placement ("" when embedded).
  std::vector<std::string> nodes;
  /// ps: the node of each shard: as `shard_nodes` lists them, else filled
  /// by placement after the workers' (round-robin continues).
  std::vector<std::string> shard_nodes;
};

/// The section of a topology parsed with job: data-parallel (throws
/// std::bad_any_cast for a topology of another job).
const section_spec& section_of(const topology& t);

/// The schema of job: data-parallel, for the topology parser.
job_schema schema();

/// Its rows of `baton compare`'s and `baton predict`'s catalogue.
std::vector<strategy_variant> variants();

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
