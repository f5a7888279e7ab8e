#pragma once

// The topology of job: ist (independent subnet training, issue 12 part A),
// as its mode reads it: the `ist:` section (workers, shards, local steps,
// hidden widths, optimizer, placement), its actors' names, edges and
// placement. The section is kept in topology::mode_spec as an
// settings (section_of reads it).
//
//   ist:
//     kind: ist           # or resist: resnet18's residual blocks dealt to workers
//     model: mlp          # ist: mlp; resist: resnet18 (the default of each kind)
//     workers: 2          # W worker actors, each trains one subnet per round
//     shards: 2           # S shard actors (default W), each owns 1/S of the neurons
//     local_steps: 10     # L SGD steps per round
//     hidden: [4096]      # the mlp's hidden widths, each >= W and >= S (kind ist)
//     optimizer: {lr: 0.01, momentum: 0, weight_decay: 0}

#include <cstdint>
#include <string>
#include <vector>

#include "actors/modes/strategy_variant.hpp"
#include "actors/config/job_schema.hpp"
#include "actors/modes/worker_group.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The most workers (and shards) an IST job may have.
inline constexpr int32_t max_workers = 64;

/// The `ist:` section, parsed and validated.
struct section_spec {
  /// `ist.kind`: "ist" (the mlp's neurons partitioned, part A) or "resist"
  /// (resnet18's residual blocks dealt to workers, part B).
  std::string kind = "ist";
  int32_t workers = 2;          ///< W: worker actors, one subnet each per round
  int32_t shards = 2;           ///< S: shard actors (default W)
  int32_t local_steps = 10;     ///< L: local SGD steps per round
  std::vector<int64_t> hidden{4096}; ///< the mlp's hidden widths
  /// `ist.optimizer` (lr, momentum, weight_decay) over the authors' plain SGD
  /// (lr 0.01, no momentum); a momentum buffer is reset every round.
  model::optimizer_spec optimizer{0.01, 0.0, 0.0};
  /// The node of each worker: as `nodes` lists them, else filled by
  /// placement ("" when embedded). Shard s runs on worker s % W's node.
  std::vector<std::string> nodes;
};

/// The section of a topology parsed with job: ist (throws std::bad_any_cast
/// for a topology of another job).
const section_spec& section_of(const topology& t);

/// The node shard `shard` runs on: its worker's, s % W.
const std::string& shard_node(const section_spec& s, int32_t shard);

/// The schema of job: ist, for the topology parser.
job_schema schema();

/// Its rows of `baton compare`'s and `baton predict`'s catalogue.
std::vector<strategy_variant> variants();

} // namespace ist
} // namespace modes
} // namespace baton::actors
