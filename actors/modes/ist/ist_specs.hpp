#pragma once

// The settings of job: ist's roles (the `settings` of their planned actors)
// and their YAML codec, for either subnet scheme S (subnet_scheme.hpp:
// neuron_scheme, block_scheme): a worker's (its index, the network's
// S::shape, local steps, the task, the data as a source reads it, the
// optimizer) and a shard's (its index, the shape, the seed, the epochs),
// each with the `run.recovery` the runtime adds at every spawn.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// A worker's settings (role `<S::kind>_worker`).
template <class Scheme>
struct worker_spec {
  int32_t worker = 0;        ///< w, its index
  int32_t workers = 1;       ///< W
  int32_t shards = 1;        ///< S
  int32_t local_steps = 10;  ///< L
  typename Scheme::shape shape; ///< the whole network's (its classes: the task's)
  model::task task;          ///< the labels it trains on
  /// The data as a source would read it: dataset, limits, the per-worker
  /// batch size, the epochs and the run's seed (network, subnets, orders).
  source_spec data;
  model::optimizer_spec optimizer; ///< momentum reset every round
  int64_t eval_batch = 256;  ///< test samples per evaluation batch (worker 0)
  int32_t threads = 1;       ///< torch threads of this actor
  int32_t progress_every = 20; ///< local steps between progress messages (worker 0)
  /// `run.recovery`: its counters' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// A shard's settings (role `<S::kind>_shard`).
template <class Scheme>
struct shard_spec {
  int32_t shard = 0;        ///< s, its index
  int32_t shards = 1;       ///< S
  int32_t workers = 1;      ///< W
  typename Scheme::shape shape; ///< the whole network's
  uint64_t seed = 42;       ///< the run's: initial network and subnets
  int32_t epochs = 1;       ///< when to stop (rounds per epoch come from the workers)
  /// `run.recovery`: its owned tensors' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// A worker's settings as YAML.
template <class Scheme>
std::string to_yaml(const worker_spec<Scheme>& x);
/// A shard's settings as YAML.
template <class Scheme>
std::string to_yaml(const shard_spec<Scheme>& x);

/// Parses to_yaml's text of a worker strictly: errc::bad_config on anything else.
template <class Scheme>
caf::expected<worker_spec<Scheme>> parse_worker_spec(const std::string& yaml);
/// Parses to_yaml's text of a shard strictly: errc::bad_config on anything else.
template <class Scheme>
caf::expected<shard_spec<Scheme>> parse_shard_spec(const std::string& yaml);

} // namespace ist
} // namespace modes
} // namespace baton::actors
