#pragma once

// The job of job: ist as a plan, for either subnet scheme S (ist.kind: ist
// or resist; subnet_scheme.hpp), here with W = 2 workers and S = 2 shards:
//
//   worker.0 <-> shard.0      peer edges: every worker knows every shard as
//   worker.0 <-> shard.1      its peer number s, every shard every worker
//   worker.1 <-> shard.0      as its peer number w
//   worker.1 <-> shard.1
//
// Every actor starts (the shards hand out round 0; worker 0 announces the
// progress total). No source: workers read the data themselves. Workers
// (role <kind>_worker) are trainable and report into the result group
// "workers" (worker 0 evaluates); shards (role <kind>_shard) are trainable
// and send the final weights (their owned tensors, in shard order: together
// the whole network). Shard s runs on worker s % W's node.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The task the workers train (`task:`); bad_config naming the file when
/// the topology has no such task.
caf::expected<const model::task*> task_of(const topology& t);

/// The plan of a topology of job: ist, of the scheme ist.kind names
/// (S::plan, job.hpp); bad_config (naming the file) when its task is
/// unknown or the scheme refuses the network (S::check_plan: an IST shard's
/// owned slices, its largest message, over the 64 MiB a message may carry).
caf::expected<job_plan> plan(const topology& t);

} // namespace ist
} // namespace modes
} // namespace baton::actors
