#pragma once

// `baton profile` and `baton plan`: the glue between a topology, the profiler
// (model/planning/profiler.hpp) and the partitioner (model/planning/partitioner.hpp). Reads and
// writes the profile JSON, prints the plan, writes the planned topology (job:
// pipeline, read with every mode's schema: this is the registry's layer, not a
// mode's). What they share with transfer's `backbone.split: auto` is in
// backbone_split.hpp.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/backbone_split.hpp"
#include "actors/modes/costing.hpp"
#include "model/planning/partitioner.hpp"
#include "model/planning/profiler.hpp"

namespace baton::actors {
inline namespace modes {

// -- profile --------------------------------------------------------------------

/// `m` (trained_model_of, costing.hpp) at its initial weights, built as the
/// job's workers or stages build it. Throws model::error.
model::layered_model build_trained_model(const trained_model& m);

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

/// Profiles the model the topology's job trains (trained_model_of: the
/// backbone with its classifier, the mlp or IST's network as they are) with
/// its optimizer and one torch thread, prints a per-layer table and writes
/// the JSON to `r.out`.
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
  double bandwidth = default_link_bandwidth; ///< --bandwidth B, bytes/s
  double memory = std::numeric_limits<double>::infinity(); ///< --memory M, bytes per machine
  bool straight = false;      ///< --straight: no replication
  /// --weight-gradient next: each cut whose stage ends in a convolution hands
  /// that layer's weight gradient on where it lowers the slowest stage
  /// (model::hand_on_weight_gradients); here (the default) only says so.
  bool hand_on_weight_gradients = false;
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

} // namespace modes
} // namespace baton::actors
