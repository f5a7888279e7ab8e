#include "actors/modes/data_parallel/data_parallel_local.hpp"

#include <chrono>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/modes/data_parallel/data_parallel_plan.hpp"
#include "actors/modes/data_parallel/data_parallel_section.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

namespace {

model::data_parallel_spec reference_spec(const data_parallel_worker_spec& worker) {
  model::data_parallel_spec spec;
  spec.workers = worker.workers;
  spec.batch_size = worker.data.plan.batch_size;
  spec.epochs = worker.data.plan.epochs;
  spec.seed = worker.data.plan.seed;
  spec.remainder = model::remainder_policy::pad;
  spec.optimizer = worker.optimizer;
  spec.linear_scaling = worker.linear_scaling;
  spec.base_batch = worker.base_batch;
  spec.warmup_epochs = worker.warmup_epochs;
  spec.sum = model::summation::ring;
  spec.bucket_mb = worker.bucket_mb;
  spec.eval_batch = worker.eval_batch;
  return spec;
}

/// The reference's result as the actors report it.
void report(const data_parallel_worker_spec& worker, const model::data_parallel_result& result,
            job_result& out) {
  messages::actor_report group;
  group.actor = workers_group;
  group.role = "data_parallel_worker";
  group.task = worker.task.name;
  group.node = "local";
  group.samples = result.samples;
  group.weights_digest = result.weights_digest;
  for (size_t e = 0; e < result.train_loss.size(); ++e)
    group.epochs.push_back({static_cast<int32_t>(e), result.train_loss[e],
                            result.test_accuracy[e], 0});
  if (!group.epochs.empty()) {
    group.train_loss = group.epochs.back().train_loss;
    group.test_accuracy = group.epochs.back().test_accuracy;
  }
  out.heads.push_back(group);
  for (int32_t w = 0; w < worker.workers; ++w) {
    messages::actor_report a;
    a.actor = worker_name(w);
    a.role = "data_parallel_worker";
    a.node = "local";
    a.weights_digest = result.weights_digest;
    out.actors.push_back(a);
  }
}

} // namespace

caf::expected<job_result> run_data_parallel_local_job(const topology& t, const run_request& r) {
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.stage_threads);
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    auto started = std::chrono::steady_clock::now();
    auto worker = worker_settings(t, *task, 0);
    auto data = load_source_data(worker.data);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    train.labels = model::apply(*task, train.labels);
    test.labels = model::apply(*task, test.labels);
    auto training_started = std::chrono::steady_clock::now();
    auto result = model::run_data_parallel_local(
      [&] { return make_data_parallel_model(worker.model); }, train, test, reference_spec(worker));
    for (size_t e = 0; e < result.test_accuracy.size(); ++e)
      spdlog::info("local data-parallel reference: epoch {} test accuracy {:.2f}%", e + 1,
                   100 * result.test_accuracy[e]);
    auto out = local_result(t, "local", started, training_started);
    report(worker, result, out);
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
