#include "actors/modes/ist/ist_local.hpp"

#include <chrono>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/modes/ist/ist_plan.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/resist_plan.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/ist/ist.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

model::ist_spec reference_spec(const ist_worker_spec& worker) {
  model::ist_spec spec;
  spec.shape = worker.shape;
  spec.workers = worker.workers;
  spec.local_steps = worker.local_steps;
  spec.batch_size = worker.data.plan.batch_size;
  spec.epochs = worker.data.plan.epochs;
  spec.seed = worker.data.plan.seed;
  spec.optimizer = worker.optimizer;
  spec.eval_batch = worker.eval_batch;
  return spec;
}

model::resist_spec reference_spec(const resist_worker_spec& worker) {
  model::resist_spec spec;
  spec.in_channels = worker.in_channels;
  spec.classes = worker.task.classes;
  spec.workers = worker.workers;
  spec.local_steps = worker.local_steps;
  spec.batch_size = worker.data.plan.batch_size;
  spec.epochs = worker.data.plan.epochs;
  spec.seed = worker.data.plan.seed;
  spec.optimizer = worker.optimizer;
  spec.eval_batch = worker.eval_batch;
  return spec;
}

/// The reference's result (model::ist_result or model::resist_result) as
/// the actors of `kind` ("ist" or "resist") report it.
template <class Result>
void report(const std::string& kind, const std::string& task, const ist_settings& settings,
            const Result& result, job_result& out) {
  const auto worker_role = kind + "_worker";
  messages::actor_report group;
  group.actor = ist_workers_group;
  group.role = worker_role;
  group.task = task;
  group.node = "local";
  group.samples = result.samples;
  group.weights_digest = result.weights_digest;
  const auto epochs = result.train_loss.size();
  const int64_t per_epoch = epochs ? result.samples / static_cast<int64_t>(epochs) : 0;
  for (size_t e = 0; e < epochs; ++e)
    group.epochs.push_back(
      {static_cast<int32_t>(e), result.train_loss[e], result.test_accuracy[e], per_epoch});
  if (!group.epochs.empty()) {
    group.train_loss = group.epochs.back().train_loss;
    group.test_accuracy = group.epochs.back().test_accuracy;
  }
  out.heads.push_back(group);
  for (int32_t w = 0; w < settings.workers; ++w) {
    messages::actor_report a;
    a.actor = ist_worker_name(w);
    a.role = worker_role;
    a.node = "local";
    if (w == 0) // the actors' worker 0 holds the whole network
      a.weights_digest = result.weights_digest;
    out.actors.push_back(a);
  }
  for (int32_t s = 0; s < settings.shards; ++s) {
    messages::actor_report a;
    a.actor = ist_shard_name(s);
    a.role = kind + "_shard";
    a.node = "local";
    out.actors.push_back(a);
  }
}

/// Loads worker 0's data with the task's labels and runs `reference` on it
/// (model::run_ist_local or model::run_resist_local of worker 0's spec).
template <class Spec, class Reference>
caf::expected<job_result> run_reference(const topology& t, const model::task& task,
                                        const Spec& worker, Reference reference) {
  const auto& kind = ist_settings_of(t).kind;
  auto started = std::chrono::steady_clock::now();
  auto data = load_source_data(worker.data);
  if (!data)
    return data.error();
  auto& [train, test] = *data;
  train.labels = model::apply(task, train.labels);
  test.labels = model::apply(task, test.labels);
  auto training_started = std::chrono::steady_clock::now();
  auto result = reference(train, test, reference_spec(worker));
  for (size_t e = 0; e < result.test_accuracy.size(); ++e)
    spdlog::info("local {} reference: epoch {} test accuracy {:.2f}%", kind, e + 1,
                 100 * result.test_accuracy[e]);
  auto out = local_result(t, "local", started, training_started);
  report(kind, task.name, ist_settings_of(t), result, out);
  return out;
}

} // namespace

caf::expected<job_result> run_ist_local_job(const topology& t, const run_request& r) {
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.stage_threads);
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    if (ist_settings_of(t).kind == "resist")
      return run_reference(t, *task, resist_worker_settings(t, *task, 0), model::run_resist_local);
    return run_reference(t, *task, ist_worker_settings(t, *task, 0), model::run_ist_local);
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
