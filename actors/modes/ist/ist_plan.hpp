#pragma once

// The IST job as a plan, here with W = 2 workers and S = 2 shards:
//
//   worker.0 <-> shard.0      peer edges: every worker knows every shard as
//   worker.0 <-> shard.1      its peer number s, every shard every worker
//   worker.1 <-> shard.0      as its peer number w
//   worker.1 <-> shard.1
//
// Every actor starts (the shards hand out round 0; worker 0 announces the
// progress total). No source: workers read the data themselves. Workers
// are trainable and report into the result group "workers" (worker 0
// evaluates); shards send the final weights (their owned slices, in shard
// order: together the whole network). Shard s runs on worker s % W's node.

#include <functional>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/ist_specs.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The network of a topology of job: ist: its samples' values, the
/// section's hidden widths, the task's classes.
model::ist_shape ist_shape_of(const topology& t, const model::task& task);

/// Worker w's settings in a topology of job: ist (the task it trains:
/// backbone.pretrain.task, looked up by the caller).
ist_worker_spec ist_worker_settings(const topology& t, const model::task& task, int32_t worker);

/// Shard s's settings.
ist_shard_spec ist_shard_settings(const topology& t, const model::task& task, int32_t shard);

/// The task the workers of either kind train (backbone.pretrain.task);
/// bad_config naming the file when the topology has no such task.
caf::expected<const model::task*> ist_task_of(const topology& t);

/// The plan of either kind ("ist" or "resist"): W workers of role
/// `<kind>_worker` (worker w's settings: worker_settings(w)), trainable, in
/// the result group "workers"; S shards of role `<kind>_shard`, trainable,
/// sending the final weights, shard s on worker s % W's node; every worker
/// knows shard s as its peer s, every shard worker w as its peer w.
job_plan make_ist_plan(const topology& t, const std::string& kind,
                       const std::function<std::string(int32_t)>& worker_settings,
                       const std::function<std::string(int32_t)>& shard_settings);

/// The plan of an IST topology (plan_resist's for ist.kind: resist); bad_config (naming the file) when its task
/// is unknown or a shard's owned slices (its largest message) would exceed
/// the 64 MiB a message may carry.
caf::expected<job_plan> plan_ist(const topology& t);

} // namespace ist
} // namespace modes
} // namespace baton::actors
