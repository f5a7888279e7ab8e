#pragma once

// The ResIST job (job: ist with ist.kind: resist) as a plan: the actors and
// peer edges of job: ist (ist_plan.hpp: W workers, S shards, every worker
// wired to every shard, shard s on worker s % W's node), with the roles
// resist_worker and resist_shard. Workers are trainable and report into the
// result group "workers" (worker 0 evaluates); shards send the final weights
// (their ranges of state tensors, in shard order: together the network).

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/resist_specs.hpp"
#include "actors/runtime/job_plan.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The channels of the topology's samples: resnet18's stem (1 for
/// Fashion-MNIST, the first of data.synthetic_shape for synthetic data).
int64_t resist_in_channels(const topology& t);

/// Worker w's settings in a ResIST topology (the task it trains:
/// backbone.pretrain.task, looked up by the caller).
resist_worker_spec resist_worker_settings(const topology& t, const model::task& task,
                                          int32_t worker);

/// Shard s's settings.
resist_shard_spec resist_shard_settings(const topology& t, const model::task& task,
                                        int32_t shard);

/// The plan of a ResIST topology; bad_config (naming the file) when its task
/// is unknown.
caf::expected<job_plan> plan_resist(const topology& t);

} // namespace ist
} // namespace modes
} // namespace baton::actors
