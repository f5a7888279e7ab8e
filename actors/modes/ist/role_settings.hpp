#pragma once

// The settings of job: ist's roles (the `settings` of their planned actors),
// for either subnet scheme S (subnet_scheme.hpp:
// neuron_scheme, block_scheme): a worker's (its index, the network's
// S::shape, local steps, the task, the data as a source reads it, the
// optimizer) and a shard's (its index, the shape, the seed, the epochs),
// each with the `run.recovery` the runtime adds at every spawn, and their
// field lists (inspect, actors/config/yaml_codec.hpp) for both directions of
// their YAML: S::to_yaml, S::parse_worker_settings, S::parse_shard_settings
// (role_settings_yaml.hpp).

#include <cstdint>
#include <string>

#include "actors/config/role_settings.hpp"
#include "actors/modes/ist/section.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"
#include "model/ist/epoch_steps.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// A worker's settings (role `<S::kind>_worker`).
template <class Scheme>
struct worker_settings {
  int32_t worker = 0;        ///< w, its index
  int32_t workers = 1;       ///< W
  int32_t shards = 1;        ///< S
  int32_t local_steps = 10;  ///< L
  typename Scheme::shape shape; ///< the whole network's (its classes: the task's)
  model::task task;          ///< the labels it trains on
  /// The data as a source would read it: dataset, limits, the per-worker
  /// batch size, the epochs and the run's seed (network, subnets, orders).
  source_settings data;
  model::optimizer_spec optimizer; ///< momentum reset every round
  int64_t eval_batch = 256;  ///< test samples per evaluation batch (worker 0)
  int32_t threads = 1;       ///< torch threads of this actor
  int32_t progress_every = 20; ///< local steps between progress messages (worker 0)
  /// `run.recovery`: its counters' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_settings recovery;
};

/// A shard's settings (role `<S::kind>_shard`).
template <class Scheme>
struct shard_settings {
  int32_t shard = 0;        ///< s, its index
  int32_t shards = 1;       ///< S
  int32_t workers = 1;      ///< W
  typename Scheme::shape shape; ///< the whole network's
  uint64_t seed = 42;       ///< the run's: initial network and subnets
  int32_t epochs = 1;       ///< when to stop (rounds per epoch come from the workers)
  /// `run.recovery`: its owned tensors' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_settings recovery;
};

/// Where round `round` lies for the worker's optimizer schedule, over
/// `train_size` samples (model::ist::schedule_of, as the local reference).
template <class Scheme>
model::ist::round_steps schedule_of(const worker_settings<Scheme>& spec, int64_t round,
                                    int64_t train_size) {
  return model::ist::schedule_of(spec.optimizer, round, train_size, spec.data.plan.batch_size,
                                 spec.workers, spec.local_steps, spec.data.plan.epochs);
}

/// `index` (the key `what`: "worker", "shard") of `count` (the key
/// `what`s, 1 to max_workers).
template <class Inspector>
void inspect_index(Inspector& f, const std::string& what, int32_t& index, int32_t& count) {
  f.field(what, index).at_least(0);
  f.field(what + "s", count).in(1, max_workers);
  f.expect(what, index < count, "less than " + what + "s");
}

/// `shape`, which must fit W workers and S shards (Scheme::misfit).
template <class Scheme, class Inspector>
void inspect_shape(Inspector& f, typename Scheme::shape& shape, int32_t workers, int32_t shards) {
  f.field("shape", shape);
  const auto misfit = Scheme::misfit(shape, workers, shards);
  f.expect("shape", misfit.empty(), misfit);
}

/// The fields of a worker's settings, in the order they are written; the
/// shape must fit W and S (Scheme::misfit) and have the task's classes.
template <class Inspector, class Scheme>
void inspect(Inspector& f, worker_settings<Scheme>& x) {
  inspect_index(f, "worker", x.worker, x.workers);
  f.field("shards", x.shards).in(1, max_workers);
  f.field("local_steps", x.local_steps).at_least(1);
  inspect_shape<Scheme>(f, x.shape, x.workers, x.shards);
  f.field("task", x.task);
  f.expect("shape.classes", x.shape.classes == x.task.classes,
           "the task's classes, " + std::to_string(x.task.classes));
  f.field("data", x.data);
  f.expect("data.batch_size", x.data.plan.batch_size >= 2, "at least 2");
  f.field("optimizer", x.optimizer);
  f.expect("optimizer.lr", x.optimizer.lr > 0, "greater than 0");
  f.field("eval_batch", x.eval_batch).at_least(1);
  f.field("threads", x.threads).at_least(1);
  f.field("progress_every", x.progress_every).at_least(1);
  inspect_run(f, x.recovery);
}

/// The fields of a shard's settings, in the order they are written; the
/// shape must fit W and S (Scheme::misfit).
template <class Inspector, class Scheme>
void inspect(Inspector& f, shard_settings<Scheme>& x) {
  inspect_index(f, "shard", x.shard, x.shards);
  f.field("workers", x.workers).in(1, max_workers);
  inspect_shape<Scheme>(f, x.shape, x.workers, x.shards);
  f.field("seed", x.seed);
  f.field("epochs", x.epochs).at_least(1);
  inspect_run(f, x.recovery);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
