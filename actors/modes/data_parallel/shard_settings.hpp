#pragma once

// The settings of a data-parallel parameter shard (role
// `data_parallel_shard`), listed once for both directions of their YAML
// (inspect, actors/config/yaml_codec.hpp); its data part is the workers'.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker_settings.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// A shard's settings (role `data_parallel_shard`).
struct shard_settings {
  int32_t shard = 0;               ///< its index: its range is shard_ranges(...)[shard]
  int32_t shards = 1;              ///< S
  int32_t workers = 1;             ///< W: pushes summed per step
  model::model_spec model;         ///< the workers' model (initial weights and layout)
  /// The last frozen layer ("" for none): the keys of layers up to it are
  /// never pushed nor pulled.
  std::string freeze_up_to;
  /// The workers' data settings: the training split's size, batch size and
  /// epochs give the run's steps; no sample is loaded.
  source_settings data;
  model::optimizer_spec optimizer; ///< lr: the schedule's base lr
  bool linear_scaling = false;     ///< lr x W x batch_size / base_batch
  int64_t base_batch = 256;
  double warmup_epochs = 0;
  int32_t threads = 1;             ///< torch threads of this actor
  /// `run.recovery`: checkpoints of its slice and momentum at steps, the
  /// step to restore (restore_step), the step it throws in (a fault).
  recovery_settings recovery;
};

/// Its fields; 0 <= shard < shards <= max_shards, a worker's model,
/// positive sizes and lr.
template <class Inspector>
void inspect(Inspector& f, shard_settings& x) {
  f.field("shard", x.shard).at_least(0);
  f.field("shards", x.shards).in(1, max_shards);
  f.expect("shard", x.shard < x.shards, "less than shards");
  f.field("workers", x.workers).at_least(1);
  f.field("model", x.model);
  expect_worker_model(f, x.model);
  f.field("freeze_up_to", x.freeze_up_to);
  inspect_schedule(f, x);
  f.field("threads", x.threads).at_least(1);
  inspect_run(f, x.recovery);
}

/// A shard's settings as YAML (the `settings` of its planned actor).
std::string to_yaml(const shard_settings& x);
/// Parses to_yaml's text of a shard strictly: errc::bad_config on anything else.
caf::expected<shard_settings> parse_shard_settings(const std::string& yaml);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
