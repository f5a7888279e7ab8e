#pragma once

// The settings of the ResIST roles (job: ist with ist.kind: resist, issue 12
// part B) and their YAML codec: a worker's (its index, the network's input
// channels, local steps, the task, the data as a source reads it, the
// optimizer) and a shard's (its index, the network, the seed, the epochs),
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

/// A ResIST worker's settings (role `resist_worker`).
struct resist_worker_spec {
  int32_t worker = 0;        ///< w, its index
  int32_t workers = 1;       ///< W
  int32_t shards = 1;        ///< S
  int32_t local_steps = 10;  ///< L
  int64_t in_channels = 1;   ///< the samples' channels (resnet18's stem)
  model::task task;          ///< the labels it trains on (its classes: fc2's outputs)
  /// The data as a source would read it: dataset, limits, the per-worker
  /// batch size, the epochs and the run's seed (network, deals, orders).
  source_spec data;
  model::optimizer_spec optimizer; ///< momentum reset every round
  int64_t eval_batch = 256;  ///< test samples per evaluation batch (worker 0)
  int32_t threads = 1;       ///< torch threads of this actor
  int32_t progress_every = 20; ///< local steps between progress messages (worker 0)
  /// `run.recovery`: its counters' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// A ResIST shard's settings (role `resist_shard`).
struct resist_shard_spec {
  int32_t shard = 0;        ///< s, its index
  int32_t shards = 1;       ///< S
  int32_t workers = 1;      ///< W
  int64_t in_channels = 1;  ///< the network's (as the workers')
  int64_t classes = 10;
  uint64_t seed = 42;       ///< the run's: initial network and deals
  int32_t epochs = 1;       ///< when to stop (rounds per epoch come from the workers)
  /// `run.recovery`: its state tensors' checkpoints at round boundaries, the
  /// round to restore (restore_step), the round it throws in (a fault).
  recovery_spec recovery;
};

/// A worker's settings as YAML.
std::string to_yaml(const resist_worker_spec& x);
/// A shard's settings as YAML.
std::string to_yaml(const resist_shard_spec& x);

/// Parses to_yaml's text of a worker strictly: errc::bad_config on anything else.
caf::expected<resist_worker_spec> parse_resist_worker_spec(const std::string& yaml);
/// Parses to_yaml's text of a shard strictly: errc::bad_config on anything else.
caf::expected<resist_shard_spec> parse_resist_shard_spec(const std::string& yaml);

} // namespace ist
} // namespace modes
} // namespace baton::actors
