#pragma once

// The topology of job: pipeline, as its mode reads it: the optional
// `pipeline:` section (schedule, stages and their replicas, or the planner's
// stages when it gives none) into a section_spec
// kept in topology::mode_spec (section_of reads it), its
// stage actors' names, edges and placement, and the rule that recovery
// needs a synchronous schedule. The task it trains is the workload's
// (`task:`), with backbone.pretrain.optimizer.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/modes/strategy_variant.hpp"
#include "actors/config/job_schema.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// Stages of a pipeline (`pipeline.stages`); never more than the model has
/// layers.
inline constexpr size_t max_stages = 64;
/// Replicas of one pipeline stage (`pipeline.stages.*.replicas`).
inline constexpr int32_t max_replicas = 64;
/// Stage actors of a pipeline, all replicas counted.
inline constexpr size_t max_actors = 256;
/// The machines the planner plans an embedded pipeline for (no nodes) when
/// its stages are the planner's: two, the smallest pipeline, and the same
/// on every machine (the stage count decides 1f1b's arithmetic).
inline constexpr int32_t embedded_stages = 2;

/// A stage of the trained model (backbone + classifier "fc2"): layers
/// [begin, end) on `replicas` machines.
struct stage_spec {
  size_t begin = 0;
  size_t end = 0;
  int32_t replicas = 1;
  std::string node;  ///< node name; empty when embedded or not placed
  std::vector<std::string> replica_nodes; ///< node of each replica (`nodes:`), else empty
  /// `weight_gradient: next`: the next stage computes the weight gradient of
  /// this stage's last layer, a convolution (model/core/stage_trainer.hpp).
  bool weight_gradient_next = false;

  /// The node of replica `r`.
  const std::string& node_of(int32_t r) const {
    return replica_nodes.empty() ? node : replica_nodes[static_cast<size_t>(r)];
  }
};

/// The `pipeline:` section, parsed and validated.
struct section_spec {
  std::string schedule = "1f1b"; ///< gpipe | 1f1b-flush | 1f1b | 1f1b-dynamic
  bool vertical_sync = false;    ///< 1f1b only: every stage uses the input stage's version
  std::vector<stage_spec> stages; ///< from `pipeline.stages`
  /// `pipeline.stages: auto` (or no stages): the planner's stages, made when
  /// a run is planned (settle_stages, plan.hpp); until
  /// then `stages` is a provisional even split over machines_of(t)
  /// stages, which checks read.
  bool stages_auto = false;
};

/// The machines a pipeline of `t` is planned for when its stages are the
/// planner's: its nodes, or embedded_stages when it has none.
int32_t machines_of(const topology& t);

/// The section of a topology parsed with job: pipeline (throws
/// std::bad_any_cast for a topology of another job).
const section_spec& section_of(const topology& t);

/// 1f1b and 1f1b-dynamic: an unreplicated stage steps after every
/// microbatch, and no step has every stage's weights consistent; gpipe and
/// 1f1b-flush step once per minibatch.
bool asynchronous(const section_spec& s);

/// The schema of job: pipeline, for the topology parser.
job_schema schema();

/// Its rows of `baton compare`'s and `baton predict`'s catalogue.
std::vector<strategy_variant> variants();

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
