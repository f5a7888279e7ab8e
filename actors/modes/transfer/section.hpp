#pragma once

// The topology of job: transfer, as its mode reads it: it has no section of
// its own but adds keys to the common ones: `heads` (the trainable heads,
// each on a task of `tasks`), and under `backbone` the frozen backbone's
// slices (`split`, `stages`, `place`), its copies (`replicas`) and its
// feature cache (`cache`, `cache_mb`, `feature_block`), and under `runtime`
// the heads' torch threads (`head_threads`). They are kept in
// topology::mode_spec as a section_spec (section_of reads it); its actors
// are the frozen stages and the trainable heads.

#include <cstddef>
#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// Heads (`heads`): one actor each.
inline constexpr size_t max_heads = 64;
/// Stages of the frozen backbone (`backbone.split`, `backbone.stages`);
/// never more than the model has layers.
inline constexpr size_t max_stages = 64;
/// Copies of the frozen backbone (`backbone.replicas`).
inline constexpr int32_t max_replicas = 16;

/// A contiguous slice [begin, end) of the backbone's layers, placed on a node.
struct stage_placement {
  std::string name;  ///< "stage0", "stage1", ...
  size_t begin = 0;
  size_t end = 0;
  std::string node;  ///< node name; empty when embedded
  /// One node per copy of the backbone (`place: [[n1, n2], ...]`); empty:
  /// every copy on `node`.
  std::vector<std::string> copy_nodes;

  /// The node of copy `r`.
  const std::string& node_of(int32_t r) const {
    return copy_nodes.empty() ? node : copy_nodes[static_cast<size_t>(r)];
  }
};

/// A trainable head placed on a node.
struct head_placement {
  model::head_spec spec; ///< name, task, model (seed derived), optimiser
  std::string node;      ///< node name; empty when embedded
};

/// What job: transfer reads of a topology.
struct section_spec {
  std::vector<stage_placement> stages; ///< resolved from `backbone.split`
  /// `backbone.split: auto`: `stages` holds the planned number of stages
  /// (`backbone.stages`, else one per `backbone.place` node, else 3) with
  /// their names and nodes, but an even split of the layers as a
  /// placeholder; `resolve_backbone_split` (plan.hpp) plans the
  /// boundaries when a run's plan is made and clears this flag.
  bool split_auto = false;
  /// `backbone.cache` (none|memory), `cache_mb` and `feature_block`: how the
  /// frozen backbone's features are computed and kept.
  model::feature_cache_spec features;
  /// `backbone.replicas`: copies of the whole chain of stages, each taking
  /// every replicas-th microbatch in turn (evaluation included); every head
  /// takes them back in the source's order. A copy of a stage runs on the
  /// stage's node, or on its own (stage_placement::copy_nodes).
  int32_t replicas = 1;
  std::vector<head_placement> heads; ///< `heads`, at least one
  /// `runtime.head_threads`: torch threads per head, 1..max_compute_threads;
  /// 0 (not set): the heads get runtime.compute_threads, asked or derived.
  int32_t head_threads = 0;
};

/// The settings of a topology parsed with job: transfer (throws
/// std::bad_any_cast for a topology of another job).
const section_spec& section_of(const topology& t);
section_spec& section_of(topology& t);

/// The schema of job: transfer, for the topology parser.
job_schema schema();

} // namespace transfer
} // namespace modes
} // namespace baton::actors
