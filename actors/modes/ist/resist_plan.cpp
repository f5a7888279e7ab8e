#include "actors/modes/ist/resist_plan.hpp"

#include "actors/modes/ist/ist_plan.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/roles/source.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

int64_t resist_in_channels(const topology& t) {
  return t.dataset == "synthetic" ? t.synthetic_shape.at(0) : 1;
}

resist_worker_spec resist_worker_settings(const topology& t, const model::task& task,
                                          int32_t worker) {
  const auto& settings = ist_settings_of(t);
  resist_worker_spec spec;
  spec.worker = worker;
  spec.workers = settings.workers;
  spec.shards = settings.shards;
  spec.local_steps = settings.local_steps;
  spec.in_channels = resist_in_channels(t);
  spec.task = task;
  spec.data = make_source_spec(t);
  spec.optimizer = settings.optimizer;
  spec.threads = t.runtime.stage_threads;
  spec.progress_every = t.runtime.progress_every;
  return spec;
}

resist_shard_spec resist_shard_settings(const topology& t, const model::task& task,
                                        int32_t shard) {
  const auto& settings = ist_settings_of(t);
  resist_shard_spec spec;
  spec.shard = shard;
  spec.shards = settings.shards;
  spec.workers = settings.workers;
  spec.in_channels = resist_in_channels(t);
  spec.classes = task.classes;
  spec.seed = t.plan.seed;
  spec.epochs = t.plan.epochs;
  return spec;
}

// resnet18's state is about 45 MB: a worker's message to one shard (S = 1)
// stays under the 64 MiB a message may carry.
caf::expected<job_plan> plan_resist(const topology& t) {
  auto task = ist_task_of(t);
  if (!task)
    return task.error();
  return make_ist_plan(
    t, "resist", [&](int32_t w) { return to_yaml(resist_worker_settings(t, **task, w)); },
    [&](int32_t s) { return to_yaml(resist_shard_settings(t, **task, s)); });
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
