#pragma once

// The topology of job: data-parallel, as its mode reads it: the
// `data_parallel:` section (workers, exchange, gradient buckets, model,
// optimizer, placement), its worker actors' names, edges and placement.
// The section is kept in topology::mode_settings as a
// data_parallel_settings (data_parallel_settings_of reads it); the model
// it names replaces backbone.model.

#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"
#include "model/training.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

/// The most workers a data-parallel job may have (each is an actor with a
/// whole model replica).
inline constexpr int32_t max_workers = 64;

/// The `data_parallel:` section, parsed and validated.
struct data_parallel_settings {
  int32_t workers = 2;            ///< W: worker actors, each with the whole model
  std::string exchange = "ring";  ///< ring (all-reduce); ps is not implemented yet
  double bucket_mb = 25;          ///< gradient bucket cap in MiB (DDP's bucket_cap_mb)
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
};

/// The section of a topology parsed with job: data-parallel (throws
/// std::bad_any_cast for a topology of another job).
const data_parallel_settings& data_parallel_settings_of(const topology& t);

/// Worker w's actor name: "worker.W" (the result group merges "worker.*").
std::string worker_name(int32_t worker);

/// The result group every worker reports into.
inline const std::string workers_group = "workers";

/// The schema of job: data-parallel, for the topology parser.
job_schema data_parallel_schema();

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
