#pragma once

// The topology of job: data-parallel, as its mode reads it: the
// `data_parallel:` section (workers, exchange, gradient buckets, model,
// optimizer, placement), its worker actors' names, edges and placement.
//
// Where the section is kept: topology.hpp has no data-parallel field yet
// (adding one rebuilds every unit of actors/, left to the session that adds
// the parameter server). Until then the section lives in fields that job:
// data-parallel does not otherwise use, read and written only here (through
// data_parallel_settings_of) and by nothing else:
//   t.pipeline           one entry: the whole model as one stage whose
//                        replicas are the workers (replicas = W, their nodes)
//   t.pretrain.optimizer the optimizer (as job: pipeline uses it)
//   t.backbone.name      the model (data_parallel.model)
//   t.schedule           "{exchange: ring, bucket_mb: 25, lr_scaling: none,
//                        base_batch: 256, warmup_epochs: 0}" (YAML)
// Moving them to a `topology::data_parallel` struct touches this file's
// parse/settings_of and nothing else.

#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"

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
  std::vector<std::string> nodes; ///< node of each worker ("" embedded / not placed)
};

/// The section of a topology parsed with job: data-parallel. Precondition:
/// t.job == "data-parallel" (the parser filled the fields it is kept in).
data_parallel_settings data_parallel_settings_of(const topology& t);

/// Worker w's actor name: "worker.W" (the result group merges "worker.*").
std::string worker_name(int32_t worker);

/// The result group every worker reports into.
inline const std::string workers_group = "workers";

/// The schema of job: data-parallel, for the topology parser.
job_schema data_parallel_schema();

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
