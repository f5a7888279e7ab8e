#pragma once

// The data-parallel job as a plan, here with W = 3:
//
//   worker.0 -> worker.1 -> worker.2 -> worker.0     peer edges: the ring
//   (every worker starts: each reads its own share of the data)
//
// With exchange: ps there is no ring: S shard actors follow the workers,
// with peer edges both ways between every worker and every shard,
//
//   worker.w -> shard.s (index s)     shard.s -> worker.w (index w)
//
// (shards start too: an idle one reports at once; they are not trainable
// and report into no result group).
//
// No source: workers load the data themselves (worker.hpp
// says why). Every worker is trainable and reports into the result group
// "workers"; worker 0 evaluates and sends the weights.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/shard.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// Worker w's settings in a topology of job: data-parallel (the task it
/// trains: backbone.pretrain.task, looked up by the caller).
worker_settings worker_settings_of(const topology& t, const model::task& task,
                                   int32_t worker);

/// Shard s's settings in a topology of job: data-parallel with exchange: ps
/// (the workers' model, data, optimizer and schedule).
shard_settings shard_settings_of(const topology& t, const model::task& task,
                                 int32_t shard);

/// The plan of a data-parallel topology; bad_config (naming the file) when
/// its task is unknown or a ring chunk would exceed the 64 MiB a message
/// may carry.
caf::expected<job_plan> plan(const topology& t);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
