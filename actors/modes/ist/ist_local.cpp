#include "actors/modes/ist/ist_local.hpp"

#include <chrono>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/ist_plan.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

/// The reference's result (model::ist_result or model::resist_result) as
/// the actors of scheme `kind` ("ist" or "resist") report it.
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

/// Loads worker 0's data with the task's labels and runs the scheme's
/// reference on it (S::run_local of worker 0's settings).
template <class Scheme>
caf::expected<job_result> run_reference(const topology& t, const model::task& task) {
  const auto worker = ist_worker_settings<Scheme>(t, task, 0);
  auto started = std::chrono::steady_clock::now();
  auto data = load_source_data(worker.data);
  if (!data)
    return data.error();
  auto& [train, test] = *data;
  train.labels = model::apply(task, train.labels);
  test.labels = model::apply(task, test.labels);
  auto training_started = std::chrono::steady_clock::now();
  auto result = Scheme::run_local(train, test, worker);
  for (size_t e = 0; e < result.test_accuracy.size(); ++e)
    spdlog::info("local {} reference: epoch {} test accuracy {:.2f}%", Scheme::kind, e + 1,
                 100 * result.test_accuracy[e]);
  auto out = local_result(t, "local", started, training_started);
  report(Scheme::kind, task.name, ist_settings_of(t), result, out);
  return out;
}

} // namespace

caf::expected<job_result> run_ist_local_job(const topology& t, const run_request& r) {
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.stage_threads);
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    if (ist_settings_of(t).kind == block_scheme::kind)
      return run_reference<block_scheme>(t, *task);
    return run_reference<neuron_scheme>(t, *task);
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
