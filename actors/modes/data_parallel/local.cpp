#include "actors/modes/data_parallel/local.hpp"

#include <chrono>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "actors/flow/error_of.hpp"
#include "actors/modes/backbone_split.hpp"
#include "actors/modes/data_parallel/plan.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker_replica.hpp"
#include "actors/modes/saved_model.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/core/export.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

/// The reference's settings for `worker` on `threads` torch threads.
model::data_parallel_settings reference_settings(const worker_settings& worker,
                                                 int32_t threads) {
  model::data_parallel_settings spec;
  spec.workers = worker.workers;
  spec.batch_size = worker.data.plan.batch_size;
  spec.epochs = worker.data.plan.epochs;
  spec.seed = worker.data.plan.seed;
  spec.remainder = model::remainder_policy::pad;
  spec.optimizer = worker.optimizer;
  spec.linear_scaling = worker.linear_scaling;
  spec.base_batch = worker.base_batch;
  spec.warmup_epochs = worker.warmup_epochs;
  // A shard sums its W pushes in worker order (ps_exchange.hpp).
  spec.sum = worker.exchange == "ps" ? model::summation::worker_order : model::summation::ring;
  spec.bucket_mb = worker.bucket_mb;
  spec.eval_batch = worker.eval_batch;
  spec.sync_every = worker.sync_every;
  spec.freeze_up_to = worker.freeze_up_to;
  spec.freeze_groups = worker.freeze_groups;
  spec.adaptive = worker.adaptive;
  spec.cache = worker.cache;
  spec.cache_mb = worker.cache_mb;
  spec.feature_block = worker.feature_block;
  // Threads for several workers compute that many at once, each on its
  // share (--threads 2, two workers: each on one thread, as the actors on
  // two cores, and so with their sums).
  spec.concurrent_workers = std::max(1, std::min(threads, spec.workers));
  spec.threads_per_worker = std::max(1, threads / spec.concurrent_workers);
  return spec;
}

/// Worker w's freeze point and adaptive decisions (every worker takes the
/// same), as the actors' reports carry theirs; worker 0's also has the
/// cache's counts, which the reference sums over the workers
/// ("cache_hits_all_workers", ...).
void add_freezing(const worker_settings& worker, int32_t w,
                  const model::data_parallel_result& result, messages::actor_report& r) {
  r.figures.push_back({"frozen_layers", static_cast<double>(result.frozen_layers)});
  if (worker.cache && w == 0) {
    const auto& c = result.cache;
    r.figures.insert(r.figures.end(),
                     {{"cache_hits_all_workers", static_cast<double>(c.hits)},
                      {"cache_misses_all_workers", static_cast<double>(c.misses)},
                      {"cache_rejected_all_workers", static_cast<double>(c.rejected)},
                      {"cache_entries_all_workers", static_cast<double>(c.entries)},
                      {"cache_bytes_all_workers", static_cast<double>(c.bytes)}});
  }
  for (const auto& d : result.decisions)
    r.events.push_back(freeze_decision_json(d));
}

/// The reference's result as the actors report it.
void report(const worker_settings& worker, const model::data_parallel_result& result,
            job_result& out) {
  // Every epoch trains the same steps of W minibatches.
  out.heads.push_back(local_group(workers_group, "data_parallel_worker", worker.task.name,
                                  result.samples, result.train_loss, result.test_accuracy,
                                  result.validation_accuracy, result.weights_digest));
  for (int32_t w = 0; w < worker.workers; ++w) {
    messages::actor_report a;
    a.actor = worker_name(w);
    a.role = "data_parallel_worker";
    a.node = "local";
    a.weights_digest = result.weights_digest;
    add_freezing(worker, w, result, a);
    out.actors.push_back(a);
  }
}

} // namespace

caf::expected<job_result> run_local(const topology& t, const run_request& r) {
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.compute_threads);
  const auto* task = t.find_task(section_of(t).task);
  if (task == nullptr)
    return make_error(errc::bad_config, "data_parallel.task is not a task of the topology");
  try {
    auto started = std::chrono::steady_clock::now();
    auto worker = worker_settings_of(t, *task, 0);
    auto data = load_task_data(worker.data, *task);
    if (!data)
      return data.error();
    auto training_started = training_starts();
    // The target, the budget and early stopping stop it as they stop the
    // actors' runs, so that `baton compare` measures its time to target as theirs.
    auto spec = reference_settings(worker, r.threads > 0 ? r.threads : t.runtime.compute_threads);
    spec.target_accuracy = t.target_accuracy;
    spec.stop_after_seconds = t.runtime.stop_after_seconds;
    spec.selection = t.selection;
    spec.warm_up_samples = warm_up_samples(t, spec.batch_size * spec.workers);
    auto result =
      model::run_data_parallel_local([&] { return initial_model(worker); }, *data, spec);
    for (size_t e = 0; e < result.test_accuracy.size(); ++e)
      spdlog::info("local data-parallel reference: epoch {} test accuracy {:.2f}%", e + 1,
                   100 * result.test_accuracy[e]);
    if (static_cast<int32_t>(result.test_accuracy.size()) < spec.epochs)
      spdlog::info("local data-parallel reference: stopped after {} of {} epochs ({})",
                   result.test_accuracy.size(), spec.epochs,
                   !result.test_accuracy.empty() && spec.target_accuracy > 0 &&
                       result.test_accuracy.back() >= spec.target_accuracy
                     ? "target_accuracy reached"
                   : t.selection.patience > 0 &&
                       static_cast<int32_t>(result.test_accuracy.size()) ==
                         result.best_epoch + 1 + t.selection.patience
                     ? "early_stopping.patience spent"
                     : "runtime.stop_after_seconds spent");
    auto out = local_result(t, "local", started, training_started);
    set_steady(out, result.steady);
    out.result_label = "workers";
    for (size_t e = 0; e < result.epoch_seconds.size(); ++e)
      out.epoch_seconds[workers_group][static_cast<int32_t>(e)] = result.epoch_seconds[e];
    report(worker, result, out);
    out.stopped = early_stop_of(out, t.selection.patience);
    // As worker 0 sends them (the best epoch's with save: best).
    messages::tensor_set weights{"weights", worker_name(0), 0, result.steps, 0,
                                 result.best_weights, {}};
    if (weights.tensors.empty())
      for (const auto& p : result.model.state())
        weights.tensors.push_back(p.detach());
    out.stage_weights.push_back(std::move(weights));
    note_best_epoch(out, workers_group, result.best_epoch, !result.best_weights.empty());
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

caf::expected<double> time_local_step(const topology& t, int32_t threads) {
  const auto* task = t.find_task(section_of(t).task);
  if (task == nullptr)
    return make_error(errc::bad_config, "data_parallel.task is not a task of the topology");
  const int previous = at::get_num_threads();
  try {
    auto worker = worker_settings_of(t, *task, 0);
    worker.checkpoint.clear(); // initial weights: the timing needs none of the file's
    at::set_num_threads(threads);
    auto seconds = model::time_reference_steps(
      [&] { return initial_model(worker); }, reference_settings(worker, threads),
      sample_shape_of(t), worker.model.classes, 15, 5, model::timed_loop_seconds);
    at::set_num_threads(previous);
    return seconds;
  } catch (const std::exception& e) { // model::error, c10::Error
    at::set_num_threads(previous);
    return error_of(e, t.file + ": timing the local loop's steps");
  }
}

caf::expected<void> save_model(const topology& t, const job_result& result,
                               const std::string& path) {
  const auto* task = t.find_task(section_of(t).task);
  if (task == nullptr)
    return make_error(errc::bad_config, "data_parallel.task is not a task of the topology");
  auto sent = sent_weights(result, worker_name(0));
  if (!sent)
    return sent.error();
  return saving(path, [&] {
    const auto spec = worker_settings_of(t, *task, 0).model;
    auto whole = make_worker_model(spec);
    if (auto err = put_sent_weights(whole, **sent, worker_name(0)))
      return err;
    model::export_model(whole, path, export_options_of(spec, t.data, result));
    return caf::error{};
  });
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
