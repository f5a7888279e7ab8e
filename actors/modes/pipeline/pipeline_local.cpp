#include "actors/modes/pipeline/pipeline_local.hpp"

#include <chrono>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/checkpoint.hpp"
#include "model/local.hpp"
#include "model/stage_trainer.hpp"
#include "model/task.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace pipeline {

namespace {

/// One epoch of the whole model, microbatch by microbatch as the stages see
/// them (a step per minibatch under a flush schedule, per microbatch under
/// 1f1b), then its test accuracy.
messages::epoch_result train_epoch(const topology& t, const model::task& task,
                                  model::stage_trainer& trainer, const model::dataset& train,
                                  const model::dataset& test, int32_t epoch) {
  bool flush = t.schedule != "1f1b";
  auto plan = model::plan_epoch(train.size(), t.plan, epoch);
  double loss_sum = 0;
  int64_t samples = 0;
  int32_t in_step = 0;
  for (size_t k = 0; k < plan.microbatches.size(); ++k) {
    auto [x, y] = model::gather(train, plan.microbatches[k]);
    auto size = plan.step_size_of[k];
    trainer.forward(static_cast<int64_t>(k), x, true);
    auto b = trainer.backward_loss(static_cast<int64_t>(k), model::apply(task, y),
                                   flush ? size : 1);
    loss_sum += b.loss * x.size(0);
    samples += x.size(0);
    if (!flush || ++in_step == size) {
      trainer.step();
      in_step = 0;
    }
  }
  int64_t correct = 0;
  for (const auto& ids : model::plan_eval(test.size(), t.plan.batch_size)) {
    auto [x, y] = model::gather(test, ids);
    correct += trainer.infer(x).argmax(1).eq(model::apply(task, y)).sum().item<int64_t>();
  }
  double accuracy = test.size() ? static_cast<double>(correct) / test.size() : 0.0;
  return {epoch, samples ? loss_sum / samples : 0.0, accuracy, samples};
}

/// The stages' reports and weights, cut from the whole model at the
/// pipeline's boundaries; the last stage carries the epochs of `trained`.
void report_stages(const topology& t, const model::task& task, model::layered_model& whole,
                   int64_t version, const messages::actor_report& trained, job_result& out) {
  for (size_t i = 0; i < t.pipeline.size(); ++i) {
    messages::actor_report stage;
    stage.actor = "stage" + std::to_string(i);
    stage.role = "pipeline_stage";
    stage.node = "local";
    auto slice = whole.slice(t.pipeline[i].begin, t.pipeline[i].end);
    stage.weights_digest = model::weights_digest(slice);
    messages::tensor_set weights{"weights", stage.actor, 0, version, 0, {}, {}};
    for (const auto& p : slice.state())
      weights.tensors.push_back(p.detach());
    out.stage_weights.push_back(std::move(weights));
    if (i + 1 == t.pipeline.size()) {
      stage.task = task.name;
      stage.samples = trained.samples;
      stage.epochs = trained.epochs;
      stage.train_loss = trained.epochs.empty() ? 0 : trained.epochs.back().train_loss;
      stage.test_accuracy = trained.epochs.empty() ? 0 : trained.epochs.back().test_accuracy;
      out.heads.push_back(stage);
    }
    out.actors.push_back(stage);
  }
}

} // namespace

caf::expected<job_result> run_pipeline_local(const topology& t, const run_request& r) {
  // The stages' thread budget by default: then the arithmetic is the same
  // bit for bit (OpenBLAS sums in another order with more threads).
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.stage_threads);
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    auto started = std::chrono::steady_clock::now();
    auto data = load_data(t, t.train_limit);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    model::stage_trainer trainer{whole, t.pretrain.optimizer, model::stash_mode::stash};
    messages::actor_report trained;
    auto training_started = std::chrono::steady_clock::now();
    for (int32_t epoch = 0; epoch < t.plan.epochs; ++epoch) {
      trained.epochs.push_back(train_epoch(t, *task, trainer, train, test, epoch));
      trained.samples += trained.epochs.back().samples;
      spdlog::info("local pipeline reference: epoch {} test accuracy {:.2f}%", epoch + 1,
                   100 * trained.epochs.back().test_accuracy);
    }
    auto out = local_result(t, "local", started, training_started);
    report_stages(t, *task, whole, trainer.version(), trained, out);
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

caf::expected<void> save_pipeline_model(const topology& t, const job_result& result,
                                        const std::string& path) {
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr || result.stage_weights.size() != t.pipeline.size())
    return make_error(errc::actor_failed,
                      "cannot save the model: " + std::to_string(result.stage_weights.size()) +
                        " of " + std::to_string(t.pipeline.size()) + " stages sent their weights");
  try {
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < t.pipeline.size(); ++i) {
      auto state = whole.slice(t.pipeline[i].begin, t.pipeline[i].end).state();
      const auto& sent = result.stage_weights[i].tensors;
      if (sent.size() != state.size())
        return make_error(errc::actor_failed,
                          "cannot save the model: stage " + std::to_string(i) + " sent " +
                            std::to_string(sent.size()) + " tensors for " +
                            std::to_string(state.size()) + " parameters and buffers");
      for (size_t p = 0; p < state.size(); ++p)
        if (!sent[p].defined() || !sent[p].sizes().equals(state[p].sizes()) ||
            sent[p].scalar_type() != state[p].scalar_type())
          return make_error(errc::actor_failed, "cannot save the model: stage " +
                                                  std::to_string(i) + " sent tensor " +
                                                  std::to_string(p) + " of the wrong shape");
      for (size_t p = 0; p < state.size(); ++p)
        state[p].copy_(sent[p]);
    }
    model::save_checkpoint(whole, path);
    return {};
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, "cannot save the model to " + path + ": " + e.what());
  }
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
