#pragma once

// Profiling a topology's backbone and cutting it into stages: what transfer's
// `backbone.split: auto` plans at a run, and what `baton profile` and `baton
// plan` (actors/modes/planning.hpp) share with it, over the profiler
// (model/planning/profiler.hpp) and PipeDream's partitioner
// (model/planning/partitioner.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "model/planning/partitioner.hpp"
#include "model/planning/profiler.hpp"

namespace baton::actors {
inline namespace modes {

/// Bytes/s a link between two machines carries when nothing says otherwise
/// (`baton plan --bandwidth`'s default, and a split across processes).
inline constexpr double default_link_bandwidth = 1e9;

/// One input sample of the topology's data, (C, H, W): Fashion-MNIST's
/// images or the synthetic set's shape.
std::vector<int64_t> sample_shape_of(const workload& w);

/// Samples per microbatch, as the source cuts a minibatch.
int64_t microbatch_size_of(const workload& w);

/// A stage's layers by name: "conv1" or "conv1..pool1".
std::string layer_range(const model::stage_plan& s, const std::vector<model::layer_cost>& layers);

/// A planned split of a model into straight stages: a frozen backbone's
/// (transfer's `backbone.split: auto`) or a pipeline's whole model
/// (`pipeline.stages: auto`).
struct backbone_split {
  model::model_profile profile;     ///< per microbatch of the topology's size
  model::partition_plan plan;       ///< straight (no replication), one stage per placement
  std::vector<std::string> split;   ///< the layers ending every stage but the last, as
                                    ///< `backbone.split` lists them
  double bandwidth = 0;             ///< bytes/s a link was charged; infinity = free
  double profile_seconds = 0;       ///< wall time spent profiling
};

/// Profiles the backbone of `t` on this machine forward only (as frozen
/// stages run it: no autograd, no backward; 2 warm-ups, 5 timed microbatches
/// of data.batch_size / data.microbatches samples, runtime.compute_threads
/// torch threads) and partitions it into `stages` stages, minimizing the
/// slowest. `across_processes`: the stages run in node processes, so a link
/// carries each activation once at default_link_bandwidth; in one process a
/// stage hands its output on without a copy and a link costs nothing. A
/// model that cannot be built or profiled is errc::bad_config naming the
/// topology file.
caf::expected<backbone_split> plan_backbone_split(const topology& t, int32_t stages,
                                                  bool across_processes);

/// Profiles the model a pipeline trains (the backbone + classifier "fc2",
/// forward, backward and an optimiser step; warm-ups, timed microbatches and
/// threads as plan_backbone_split) and partitions it with PipeDream's
/// planner into the fastest straight pipeline (no replicas) on at most
/// `machines` machines: what `baton profile` then `baton plan --straight
/// --machines N` would choose. Links as plan_backbone_split's. bad_config
/// naming the topology file when it cannot be built or profiled.
caf::expected<backbone_split> plan_pipeline_stages(const topology& t, int32_t machines,
                                                   bool across_processes);

/// Logs a planned split: what was measured, the split as `backbone.split`
/// would list it, and the predicted time of every stage.
void log_backbone_split(const backbone_split& b);

} // namespace modes
} // namespace baton::actors
