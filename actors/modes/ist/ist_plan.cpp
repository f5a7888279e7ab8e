#include "actors/modes/ist/ist_plan.hpp"

#include <spdlog/spdlog.h>

#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

/// The divergence warning's advice: each worker takes L plain SGD steps on
/// its own subnet between two merges, with a fresh optimizer every round,
/// so the lr, the momentum and L are what to change.
template <class Scheme>
std::string divergence_advice(const topology& t) {
  const auto& s = ist_settings_of(t);
  return fmt::format("job: ist (kind {}) has each of {} workers take {} SGD steps of {} samples "
                     "with lr {:g} and momentum {:g} on its own {} between two merges; lower "
                     "ist.optimizer.lr or momentum, or ist.local_steps",
                     Scheme::kind, s.workers, s.local_steps, t.plan.batch_size, s.optimizer.lr,
                     s.optimizer.momentum, Scheme::subnet);
}

/// Shard s's settings.
template <class Scheme>
shard_spec<Scheme> shard_settings(const topology& t, const model::task& task, int32_t shard) {
  const auto& settings = ist_settings_of(t);
  shard_spec<Scheme> spec;
  spec.shard = shard;
  spec.shards = settings.shards;
  spec.workers = settings.workers;
  spec.shape = Scheme::shape_of(t, task);
  spec.seed = t.plan.seed;
  spec.epochs = t.plan.epochs;
  return spec;
}

/// W workers of role <kind>_worker, trainable, in the result group
/// "workers"; S shards of role <kind>_shard, trainable, sending the final
/// weights, shard s on worker s % W's node; every worker knows shard s as
/// its peer s, every shard worker w as its peer w.
template <class Scheme>
job_plan make_plan(const topology& t, const model::task& task) {
  const auto& settings = ist_settings_of(t);
  const std::string kind = Scheme::kind;
  job_plan plan;
  plan.divergence_advice = divergence_advice<Scheme>(t);
  for (int32_t w = 0; w < settings.workers; ++w) {
    auto a = make_planned_actor(kind + "_worker", ist_worker_name(w),
                                settings.nodes[static_cast<size_t>(w)],
                                to_yaml(ist_worker_settings<Scheme>(t, task, w)));
    a.threads = t.runtime.stage_threads;
    a.trainable = true;
    a.starts = true;
    a.result = ist_workers_group;
    plan.actors.push_back(std::move(a));
  }
  for (int32_t s = 0; s < settings.shards; ++s) {
    auto a = make_planned_actor(kind + "_shard", ist_shard_name(s), ist_shard_node(settings, s),
                                to_yaml(shard_settings<Scheme>(t, task, s)));
    a.trainable = true; // it checkpoints what it owns (actors/roles/checkpointing.hpp)
    a.starts = true;
    a.sends_weights = true;
    plan.actors.push_back(std::move(a));
  }
  for (int32_t w = 0; w < settings.workers; ++w)
    for (int32_t s = 0; s < settings.shards; ++s) {
      plan.edges.push_back({planned_edge::kind_t::peer, ist_worker_name(w), ist_shard_name(s), s});
      plan.edges.push_back({planned_edge::kind_t::peer, ist_shard_name(s), ist_worker_name(w), w});
    }
  return plan;
}

template <class Scheme>
caf::expected<job_plan> plan_scheme(const topology& t) {
  auto task = ist_task_of(t);
  if (!task)
    return task.error();
  if (auto err = Scheme::check_plan(t, Scheme::shape_of(t, **task), ist_settings_of(t).shards))
    return err;
  return make_plan<Scheme>(t, **task);
}

} // namespace

caf::expected<const model::task*> ist_task_of(const topology& t) {
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config, t.file + ": backbone.pretrain.task '" + t.pretrain.task +
                                          "' is not one of the topology's tasks");
  return task;
}

template <class Scheme>
worker_spec<Scheme> ist_worker_settings(const topology& t, const model::task& task,
                                        int32_t worker) {
  const auto& settings = ist_settings_of(t);
  worker_spec<Scheme> spec;
  spec.worker = worker;
  spec.workers = settings.workers;
  spec.shards = settings.shards;
  spec.local_steps = settings.local_steps;
  spec.shape = Scheme::shape_of(t, task);
  spec.task = task;
  spec.data = make_source_spec(t);
  spec.optimizer = settings.optimizer;
  spec.threads = t.runtime.stage_threads;
  spec.progress_every = t.runtime.progress_every;
  return spec;
}

template worker_spec<neuron_scheme> ist_worker_settings(const topology&, const model::task&,
                                                        int32_t);
template worker_spec<block_scheme> ist_worker_settings(const topology&, const model::task&,
                                                       int32_t);

caf::expected<job_plan> plan_ist(const topology& t) {
  if (ist_settings_of(t).kind == block_scheme::kind)
    return plan_scheme<block_scheme>(t);
  return plan_scheme<neuron_scheme>(t);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
