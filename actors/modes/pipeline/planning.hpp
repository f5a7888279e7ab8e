#pragma once

// `baton profile` and `baton plan`: the glue between a topology, the profiler
// (model/planning/profiler.hpp) and the partitioner (model/planning/partitioner.hpp). Reads and
// writes the profile JSON, prints the plan, writes the planned topology. Also
// plans `backbone.split: auto` for the transfer job when it runs.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "actors/config/topology.hpp"
#include "model/planning/partitioner.hpp"
#include "model/planning/profiler.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace pipeline {

// -- profile --------------------------------------------------------------------

/// `baton profile` arguments.
struct profile_request {
  std::string topology_path;
  std::string out;              ///< --out FILE (required)
  int32_t microbatches = 10;    ///< --microbatches N: timed microbatches, averaged
  int64_t microbatch_size = 0;  ///< --batch B: samples per microbatch; 0 = the
                                ///< topology's data.batch_size / data.microbatches
};

/// A profile as the JSON file holds it: the measurements and where they came from.
struct profile_file {
  model::model_profile profile;
  std::string topology;  ///< absolute path of the profiled topology
  int32_t warmups = 0;
  int32_t microbatches_per_minibatch = 1; ///< the topology's data.microbatches
};

/// Profiles the topology's model (backbone + classifier, as pre-training
/// builds it; the mlp as it is) with one torch thread, prints a per-layer
/// table and writes the JSON to `r.out`.
caf::expected<profile_file> run_profile(const profile_request& r);

/// The profile JSON: {"model", "topology", "microbatch_size",
/// "microbatches_per_minibatch", "timed_microbatches", "warmups", "threads",
/// "machine": {"hostname", "cores"}, "layers": [{"name", "forward_seconds",
/// "backward_seconds", "activation_bytes", "parameter_bytes"}]}.
nlohmann::ordered_json to_json(const profile_file& p);

/// Reads a profile JSON; `name` (its path) is used in error messages
/// (errc::bad_file naming the key and what was expected).
caf::expected<profile_file> profile_from_json(const nlohmann::ordered_json& j,
                                               const std::string& name);
caf::expected<profile_file> load_profile(const std::string& path);

// -- plan -------------------------------------------------------------------------

/// `baton plan` arguments.
struct plan_request {
  std::string profile_path;   ///< --profile FILE (required)
  int32_t machines = 0;       ///< --machines N (required, >= 1)
  double bandwidth = 1e9;     ///< --bandwidth B, bytes/s
  double memory = std::numeric_limits<double>::infinity(); ///< --memory M, bytes per machine
  bool straight = false;      ///< --straight: no replication
  std::string out;            ///< --out FILE: the planned topology YAML
  std::string topology_path;  ///< --topology FILE; empty = the profile's
};

/// Plans, prints the plan and writes the topology if asked. An infeasible
/// plan or a bad profile is errc::bad_config / errc::bad_file.
caf::expected<model::partition_plan> run_plan(const plan_request& r);

/// The plan as text: PipeDream's notation, each stage's layer range (names),
/// replicas, compute, weight sync, output transfer and memory, and the
/// predicted time per microbatch of the slowest stage.
std::string describe_plan(const model::partition_plan& plan, const profile_file& p,
                          const model::partition_options& options);

/// The topology file at `topology_path` with `job: pipeline` and a
/// `pipeline:` section (schedule 1f1b, one {last_layer, replicas} per stage);
/// relative paths are made absolute so the file works from any directory.
caf::expected<std::string> planned_topology_yaml(const std::string& topology_path,
                                                 const model::partition_plan& plan,
                                                 const std::vector<model::layer_cost>& layers);

// -- backbone split (`backbone.split: auto`) ---------------------------------------

/// A planned split of the transfer job's frozen backbone.
struct backbone_split {
  model::model_profile profile;     ///< forward only, per microbatch of the topology's size
  model::partition_plan plan;       ///< straight (no replication), one stage per placement
  std::vector<std::string> split;   ///< the layers ending every stage but the last, as
                                    ///< `backbone.split` lists them
  double bandwidth = 0;             ///< bytes/s a link was charged; infinity = free
  double profile_seconds = 0;       ///< wall time spent profiling
};

/// Profiles the backbone of `t` on this machine forward only (as its frozen
/// stages run: no autograd, no backward; 2 warm-ups, 5 timed microbatches of
/// data.batch_size / data.microbatches samples, runtime.stage_threads torch
/// threads) and partitions it into as many stages as the transfer job has
/// (transfer_settings::stages), minimizing the
/// slowest. `across_processes`: the stages run in node processes, so a link
/// carries each activation once at `baton plan`'s default bandwidth (1e9
/// bytes/s); in one process a stage hands its output on without a copy and a
/// link costs nothing. A model that cannot be built or profiled is
/// errc::bad_config naming the topology file.
caf::expected<backbone_split> plan_backbone_split(const topology& t, bool across_processes);

/// For a transfer topology with `backbone.split: auto`: plans the split, sets
/// the stages' layer ranges (their names and nodes stay), clears split_auto and
/// logs the split (layer names) and the predicted time per stage. Nothing
/// happens otherwise. `local_nodes` > 0: the run will place the stages on that
/// many node processes (`baton run --local-nodes`).
caf::expected<void> resolve_backbone_split(topology& t, int32_t local_nodes = 0);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
