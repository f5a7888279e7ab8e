#pragma once

// The settings of the IST roles (the `settings` of their planned actors) and
// their YAML codec: a worker's (its index, the network's shape, local steps,
// the data as a source reads it, the optimizer) and a shard's (its index,
// the shape, the seed, the epochs), each with the `run.recovery` the runtime
// adds at every spawn.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"
#include "model/ist/ist_network.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// A worker's settings (role `ist_worker`).
struct ist_worker_spec {
  int32_t worker = 0;        ///< w, its index
  int32_t workers = 1;       ///< W
  int32_t shards = 1;        ///< S
  int32_t local_steps = 10;  ///< L
  model::ist_shape shape;    ///< inputs, hidden widths, classes (the task's)
  model::task task;          ///< the labels it trains on
  /// The data as a source would read it: dataset, limits, the per-worker
  /// batch size, the epochs and the run's seed (network, partitions, orders).
  source_spec data;
  model::optimizer_spec optimizer; ///< momentum reset every round
  int64_t eval_batch = 256;  ///< test samples per evaluation batch (worker 0)
  int32_t threads = 1;       ///< torch threads of this actor
  int32_t progress_every = 20; ///< local steps between progress messages (worker 0)
  /// `run.recovery`: its counters' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// A shard's settings (role `ist_shard`).
struct ist_shard_spec {
  int32_t shard = 0;        ///< s, its index
  int32_t shards = 1;       ///< S
  int32_t workers = 1;      ///< W
  model::ist_shape shape;   ///< the whole network's
  uint64_t seed = 42;       ///< the run's: initial network and partitions
  int32_t epochs = 1;       ///< when to stop (rounds per epoch come from the workers)
  /// `run.recovery`: its owned slices' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// Throws std::runtime_error unless 0 <= index < count <= ist_max_workers
/// (`what`: "worker" or "shard"), for the settings decoders.
void check_ist_index(int32_t index, int32_t count, const char* what);

/// A worker's settings as YAML.
std::string to_yaml(const ist_worker_spec& x);
/// A shard's settings as YAML.
std::string to_yaml(const ist_shard_spec& x);

/// Parses to_yaml's text of a worker strictly: errc::bad_config on anything else.
caf::expected<ist_worker_spec> parse_ist_worker_spec(const std::string& yaml);
/// Parses to_yaml's text of a shard strictly: errc::bad_config on anything else.
caf::expected<ist_shard_spec> parse_ist_shard_spec(const std::string& yaml);

} // namespace ist
} // namespace modes
} // namespace baton::actors
