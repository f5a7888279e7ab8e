#pragma once

// The transfer job as a plan:
//
//   source -> stage0 -> ... -> stageN-1 -+-> head a
//   (starts)   frozen backbone slices    +-> head b    trainable, one result each
//                                        +-> ...
//
// Every microbatch crosses the frozen backbone once and goes to every head.
// Every optimiser step of a head is a consistent cut (heads are independent).

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/mode.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// The plan of a transfer topology (job: transfer) as its settings stand:
/// with `backbone.split: auto` unresolved, the placeholder split the parser
/// made; errc::bad_config when a head's schedule needs the training samples
/// and the data cannot be read here.
caf::expected<job_plan> plan(const topology& t);

/// The plan of a transfer topology for `use`: for a run, `backbone.split:
/// auto` is resolved first (resolve_backbone_split; a link between stages
/// costs what it does when `t` has nodes); for a check, as plan.
caf::expected<job_plan> plan(const topology& t, plan_use use);

/// With `backbone.split: auto`: profiles the backbone, partitions it into the
/// planned stages (plan_backbone_split, actors/modes/backbone_split.hpp; across
/// processes when `t` has nodes), sets their layer ranges (their names and
/// nodes stay), clears split_auto and logs the split and the predicted time
/// per stage. Nothing happens otherwise.
caf::expected<void> resolve_backbone_split(topology& t);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
