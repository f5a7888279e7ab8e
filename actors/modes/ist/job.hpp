#pragma once

// The job of either subnet scheme S (subnet_scheme.hpp): S::worker_settings_of,
// S::plan (plan.hpp draws it) and S::run_local (local.hpp). A
// scheme's .cpp includes this and instantiates them (template struct
// subnet_scheme<...>).

#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "actors/modes/ist/plan.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/subnet_scheme.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace job {

/// The divergence warning's advice: each worker takes L plain SGD steps on
/// its own subnet between two merges, with a fresh optimizer every round,
/// so the lr, the momentum and L are what to change.
template <class Scheme>
std::string divergence_advice(const topology& t) {
  const auto& s = section_of(t);
  return fmt::format("job: ist (kind {}) has each of {} workers take {} SGD steps of {} samples "
                     "with lr {:g} and momentum {:g} on its own {} between two merges; lower "
                     "ist.optimizer.lr or momentum, or ist.local_steps",
                     Scheme::names.kind, s.workers, s.local_steps, t.plan.batch_size,
                     s.optimizer.lr, s.optimizer.momentum, Scheme::names.subnet);
}

/// Shard s's settings.
template <class Scheme>
shard_settings<Scheme> shard_settings_of(const topology& t, const model::task& task, int32_t shard) {
  const auto& settings = section_of(t);
  shard_settings<Scheme> spec;
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
  const auto& settings = section_of(t);
  const std::string kind = Scheme::names.kind;
  job_plan plan;
  plan.divergence_advice = divergence_advice<Scheme>(t);
  plan.strategy = kind;                    // ist | resist
  plan.result_label = "workers";           // one result: the workers' merged reports
  plan.progress_shares = settings.workers; // worker 0 reports its share of each round
  for (int32_t w = 0; w < settings.workers; ++w) {
    auto a = make_planned_actor(kind + "_worker", worker_name(w),
                                settings.nodes[static_cast<size_t>(w)],
                                Scheme::to_yaml(Scheme::worker_settings_of(t, task, w)));
    a.threads = t.runtime.compute_threads;
    a.trainable = true;
    a.starts = true;
    a.result = workers_group;
    plan.actors.push_back(std::move(a));
  }
  for (int32_t s = 0; s < settings.shards; ++s) {
    auto a = make_planned_actor(kind + "_shard", shard_name(s), shard_node(settings, s),
                                Scheme::to_yaml(shard_settings_of<Scheme>(t, task, s)));
    a.with = worker_name(s % settings.workers); // on its worker's node, wherever that is
    a.threads = 0;      // it averages what the workers send: no compute budget
    a.trainable = true; // it checkpoints what it owns (actors/roles/checkpointing.hpp)
    a.starts = true;
    a.sends_weights = true;
    plan.actors.push_back(std::move(a));
  }
  for (int32_t w = 0; w < settings.workers; ++w)
    for (int32_t s = 0; s < settings.shards; ++s) {
      plan.edges.push_back({planned_edge::kind_t::peer, worker_name(w), shard_name(s), s});
      plan.edges.push_back({planned_edge::kind_t::peer, shard_name(s), worker_name(w), w});
    }
  return plan;
}

/// The reference's result (model::ist::result or model::ist::resist_result) as
/// the actors of scheme `kind` ("ist" or "resist") report it.
template <class Result>
void report(const std::string& kind, const std::string& task, const section_spec& section,
            const Result& result, job_result& out) {
  const auto worker_role = kind + "_worker";
  out.heads.push_back(local_group(workers_group, worker_role, task, result.samples,
                                  result.train_loss, result.test_accuracy,
                                  result.validation_accuracy, result.weights_digest));
  for (int32_t w = 0; w < section.workers; ++w) {
    messages::actor_report a;
    a.actor = worker_name(w);
    a.role = worker_role;
    a.node = "local";
    if (w == 0) // the actors' worker 0 holds the whole network
      a.weights_digest = result.weights_digest;
    out.actors.push_back(a);
  }
  for (int32_t s = 0; s < section.shards; ++s) {
    messages::actor_report a;
    a.actor = shard_name(s);
    a.role = kind + "_shard";
    a.node = "local";
    out.actors.push_back(a);
  }
}

} // namespace job

template <class Network>
auto subnet_scheme<Network>::worker_settings_of(const topology& t, const model::task& task,
                                                int32_t worker) -> worker_settings {
  const auto& settings = section_of(t);
  worker_settings spec;
  spec.worker = worker;
  spec.workers = settings.workers;
  spec.shards = settings.shards;
  spec.local_steps = settings.local_steps;
  spec.shape = shape_of(t, task);
  spec.task = task;
  spec.data = make_source_settings(t);
  spec.optimizer = settings.optimizer;
  spec.threads = t.runtime.compute_threads;
  spec.progress_every = t.runtime.progress_every;
  return spec;
}

template <class Network>
caf::expected<job_plan> subnet_scheme<Network>::plan(const topology& t) {
  auto task = task_of(t);
  if (!task)
    return task.error();
  if (auto err = check_plan(t, shape_of(t, **task), section_of(t).shards))
    return err;
  return job::make_plan<subnet_scheme>(t, **task);
}

template <class Network>
caf::expected<job_result> subnet_scheme<Network>::run_local(const topology& t,
                                                            const model::task& task) {
  const auto worker = worker_settings_of(t, task, 0);
  auto started = std::chrono::steady_clock::now();
  auto data = load_task_data(worker.data, task);
  if (!data)
    return data.error();
  auto training_started = training_starts();
  auto result = run_reference(*data, worker, t.selection);
  for (size_t e = 0; e < result.test_accuracy.size(); ++e)
    spdlog::info("local {} reference: epoch {} test accuracy {:.2f}%", names.kind, e + 1,
                 100 * result.test_accuracy[e]);
  auto out = local_result(t, "local", started, training_started);
  out.mode = names.kind;
  out.result_label = "workers";
  job::report(names.kind, task.name, section_of(t), result, out);
  out.stopped = early_stop_of(out, t.selection.patience);
  // The network as the shards send it (--save-model): the final one, or
  // with save: best the best epoch's.
  const bool kept = t.selection.keep_best && result.best_epoch >= 0;
  if (kept)
    result.network = result.best_network;
  note_best_epoch(out, workers_group, result.best_epoch, kept);
  auto owned = owned_pieces(result, worker);
  for (size_t s = 0; s < owned.size(); ++s)
    out.stage_weights.push_back({"weights", shard_name(static_cast<int32_t>(s)),
                                 static_cast<int32_t>(s), 0, 0, std::move(owned[s]), {}});
  return out;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
