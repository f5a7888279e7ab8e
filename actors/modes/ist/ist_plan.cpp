#include "actors/modes/ist/ist_plan.hpp"

#include <spdlog/spdlog.h>

#include "actors/modes/ist/ist_pieces.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/resist_plan.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

constexpr int64_t max_message_bytes = int64_t{64} << 20;

/// The values of one sample: C x H x W (Fashion-MNIST: 1 x 28 x 28).
int64_t sample_values(const topology& t) {
  if (t.dataset != "synthetic")
    return 28 * 28;
  int64_t n = 1;
  for (int64_t d : t.synthetic_shape)
    n *= d;
  return n;
}

/// The divergence warning's advice: each worker takes L plain SGD steps on
/// its own subnet (ResIST: sub-ResNet) between two merges, with a fresh
/// optimizer every round, so the lr, the momentum and L are what to change.
std::string divergence_advice(const topology& t, const std::string& kind) {
  const auto& s = ist_settings_of(t);
  return fmt::format("job: ist (kind {}) has each of {} workers take {} SGD steps of {} samples "
                     "with lr {:g} and momentum {:g} on its own {} between two merges; lower "
                     "ist.optimizer.lr or momentum, or ist.local_steps",
                     kind, s.workers, s.local_steps, t.plan.batch_size, s.optimizer.lr,
                     s.optimizer.momentum, kind == "resist" ? "sub-ResNet" : "subnet");
}

} // namespace

model::ist_shape ist_shape_of(const topology& t, const model::task& task) {
  model::ist_shape shape;
  shape.inputs = sample_values(t);
  shape.hidden = ist_settings_of(t).hidden;
  shape.classes = task.classes;
  return shape;
}

ist_worker_spec ist_worker_settings(const topology& t, const model::task& task, int32_t worker) {
  const auto& settings = ist_settings_of(t);
  ist_worker_spec spec;
  spec.worker = worker;
  spec.workers = settings.workers;
  spec.shards = settings.shards;
  spec.local_steps = settings.local_steps;
  spec.shape = ist_shape_of(t, task);
  spec.task = task;
  spec.data = make_source_spec(t);
  spec.optimizer = settings.optimizer;
  spec.threads = t.runtime.stage_threads;
  spec.progress_every = t.runtime.progress_every;
  return spec;
}

ist_shard_spec ist_shard_settings(const topology& t, const model::task& task, int32_t shard) {
  const auto& settings = ist_settings_of(t);
  ist_shard_spec spec;
  spec.shard = shard;
  spec.shards = settings.shards;
  spec.workers = settings.workers;
  spec.shape = ist_shape_of(t, task);
  spec.seed = t.plan.seed;
  spec.epochs = t.plan.epochs;
  return spec;
}

caf::expected<const model::task*> ist_task_of(const topology& t) {
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, t.file + ": backbone.pretrain.task '" + t.pretrain.task +
                                          "' is not one of the topology's tasks");
  return task;
}

job_plan make_ist_plan(const topology& t, const std::string& kind,
                       const std::function<std::string(int32_t)>& worker_settings,
                       const std::function<std::string(int32_t)>& shard_settings) {
  const auto& settings = ist_settings_of(t);
  job_plan plan;
  plan.divergence_advice = divergence_advice(t, kind);
  for (int32_t w = 0; w < settings.workers; ++w) {
    auto a = make_planned_actor(kind + "_worker", ist_worker_name(w),
                                settings.nodes[static_cast<size_t>(w)], worker_settings(w));
    a.threads = t.runtime.stage_threads;
    a.trainable = true;
    a.starts = true;
    a.result = ist_workers_group;
    plan.actors.push_back(std::move(a));
  }
  for (int32_t s = 0; s < settings.shards; ++s) {
    auto a = make_planned_actor(kind + "_shard", ist_shard_name(s), ist_shard_node(settings, s),
                                shard_settings(s));
    a.trainable = true; // it checkpoints what it owns (actors/roles/recovery.hpp)
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

caf::expected<job_plan> plan_ist(const topology& t) {
  if (ist_settings_of(t).kind == "resist")
    return plan_resist(t);
  auto task = ist_task_of(t);
  if (!task)
    return task.error();
  const auto& settings = ist_settings_of(t);
  // Shard 0 owns the most (the first parts are one neuron longer); a subnet
  // piece is part of an owned slice, so no message is larger.
  const int64_t bytes = ist_owned_elements(ist_shape_of(t, **task), 0, settings.shards) * 4;
  if (bytes > max_message_bytes)
    return make_error(errc::bad_config,
                      t.file + ": a shard's slices of " + std::to_string(bytes >> 20) +
                        " MiB exceed the 64 MiB a message may carry (add ist.shards)");
  return make_ist_plan(
    t, "ist", [&](int32_t w) { return to_yaml(ist_worker_settings(t, **task, w)); },
    [&](int32_t s) { return to_yaml(ist_shard_settings(t, **task, s)); });
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
