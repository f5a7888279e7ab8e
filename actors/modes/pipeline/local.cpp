#include "actors/modes/pipeline/local.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include "actors/modes/pipeline/plan.hpp"
#include "actors/modes/pipeline/section.hpp"
#include "actors/modes/saved_model.hpp"
#include "actors/modes/schedule_length.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "actors/runtime/local_run.hpp"
#include "actors/runtime/run_stop.hpp"
#include "messages/errc.hpp"
#include "model/core/export.hpp"
#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/best_weights.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/pretrain.hpp"
#include "model/core/stage_trainer.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

namespace {

/// The trainable model of a local run: the whole model as one trainer
/// (flush schedules: a step per minibatch equals the pipeline's), or one
/// trainer per stage (asynchronous 1f1b: the stages' versions differ).
struct local_trainers {
  std::vector<model::stage_trainer> stages;
  model::warm_up_watch warm_up;
  int64_t trained = 0; ///< samples through the last stage's backward, every epoch's

  /// The last stage trained a microbatch of `samples`.
  void trained_microbatch(int64_t samples) {
    trained += samples;
    warm_up.trained(trained);
  }

  /// Evaluation through every trainer in order.
  at::Tensor infer(at::Tensor x) {
    for (auto& s : stages)
      x = s.infer(x);
    return x;
  }
};

/// gpipe and 1f1b-flush: one step per minibatch.
bool flush_schedule(const topology& t) {
  return !asynchronous(section_of(t));
}

/// A training epoch's sums.
struct epoch_sums {
  double loss_sum = 0;
  int64_t samples = 0;
};

/// Flush schedules: microbatch by microbatch through the whole model, a step
/// per minibatch (gradient accumulation).
epoch_sums train_flush(const model::task& task, local_trainers& trainers,
                       const model::dataset& train, const model::epoch_plan& plan) {
  auto& trainer = trainers.stages.front();
  epoch_sums sums;
  int32_t in_step = 0;
  for (size_t k = 0; k < plan.microbatches.size(); ++k) {
    auto [x, y] = model::gather_training(train, plan.microbatches[k], plan.epoch);
    auto size = plan.step_size_of[k];
    trainer.forward(static_cast<int64_t>(k), x, true);
    auto b = trainer.backward_loss(static_cast<int64_t>(k), model::apply(task, y), size);
    sums.loss_sum += b.loss * x.size(0);
    sums.samples += x.size(0);
    trainers.trained_microbatch(x.size(0));
    if (++in_step == size) {
      trainer.step();
      in_step = 0;
    }
  }
  return sums;
}

/// PipeDream's static 1F1B order, simulated in one thread: every stage does
/// what pipeline_stage's static order makes it do (a forward while fewer
/// than NOAM = stages after it + 1 are in flight and training microbatches
/// remain, else the backward of its oldest microbatch, a step after each),
/// whenever its input or gradient is there. A stage's weights depend only
/// on its own sequence of operations, so any interleaving of the stages
/// gives the pipeline's weights bit for bit.
class static_1f1b_epoch {
public:
  static_1f1b_epoch(const model::task& task, local_trainers& trainers,
                    const model::dataset& train, const model::epoch_plan& plan)
    : task_(task), trainers_(trainers), train_(train), plan_(plan),
      stages_(trainers.stages.size()) {}

  epoch_sums run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t i = 0; i < stages_.size(); ++i)
        while (act(i))
          progress = true;
    }
    for (const auto& s : stages_)
      if (s.forwarded != plan_.microbatches.size() || !s.in_flight.empty())
        throw std::logic_error("static 1F1B simulation stalled");
    return sums_;
  }

private:
  struct stage {
    size_t forwarded = 0;
    std::deque<int64_t> in_flight;          ///< forwarded, not yet backward, oldest first
    std::map<int64_t, at::Tensor> inputs;    ///< activations from the stage before
    std::map<int64_t, at::Tensor> gradients; ///< from the stage after
  };

  /// One operation of stage `i`, if the one its order says is possible.
  bool act(size_t i) {
    auto& s = stages_[i];
    auto noam = stages_.size() - i;
    if (s.in_flight.size() < noam && s.forwarded < plan_.microbatches.size())
      return forward(i);
    if (s.in_flight.empty() || s.gradients.count(s.in_flight.front()) == 0)
      return false;
    auto k = s.in_flight.front();
    s.in_flight.pop_front();
    auto r = trainers_.stages[i].backward(k, s.gradients.at(k));
    s.gradients.erase(k);
    finish_backward(i, k, r);
    return true;
  }

  bool forward(size_t i) {
    auto& s = stages_[i];
    auto k = static_cast<int64_t>(s.forwarded);
    at::Tensor input;
    if (i == 0) {
      input = model::gather_training(train_, plan_.microbatches[s.forwarded], plan_.epoch).first;
    } else if (s.inputs.count(k) == 0) {
      return false; // wait for it, as a stage does
    } else {
      input = s.inputs.at(k);
      s.inputs.erase(k);
    }
    s.forwarded += 1;
    auto& trainer = trainers_.stages[i];
    auto out = trainer.forward(k, input, i == 0);
    if (i + 1 < stages_.size()) {
      stages_[i + 1].inputs[k] = out;
      s.in_flight.push_back(k);
      return true;
    }
    auto labels = model::gather(train_, plan_.microbatches[s.forwarded - 1]).second;
    auto r = trainer.backward_loss(k, model::apply(task_, labels), 1);
    sums_.loss_sum += r.loss * out.size(0);
    sums_.samples += out.size(0);
    trainers_.trained_microbatch(out.size(0));
    finish_backward(i, k, r);
    return true;
  }

  /// The gradient to the stage before, then the step.
  void finish_backward(size_t i, int64_t k, const model::backward_result& r) {
    if (i > 0)
      stages_[i - 1].gradients[k] = r.input_gradient;
    trainers_.stages[i].step();
  }

  const model::task& task_;
  local_trainers& trainers_;
  const model::dataset& train_;
  const model::epoch_plan& plan_;
  std::vector<stage> stages_;
  epoch_sums sums_;
};

/// The accuracy of the trainers on `data` (-1 when it has no samples), in
/// the source's evaluation batches.
double local_accuracy(const topology& t, const model::task& task, local_trainers& trainers,
                      const model::dataset& data) {
  if (data.size() == 0)
    return -1;
  int64_t correct = 0;
  for (const auto& ids : model::plan_eval(data.size(), t.plan.batch_size)) {
    auto [x, y] = model::gather(data, ids);
    correct += trainers.infer(x).argmax(1).eq(model::apply(task, y)).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

/// One epoch, microbatch by microbatch as the stages see them, then its
/// test and validation accuracy.
messages::epoch_result train_epoch(const topology& t, const model::task& task,
                                   local_trainers& trainers, const model::data_splits& data,
                                   int32_t epoch) {
  auto plan = model::plan_epoch(data.train.size(), t.plan, epoch);
  trainers.warm_up.epoch_started();
  auto sums = flush_schedule(t) ? train_flush(task, trainers, data.train, plan)
                : static_1f1b_epoch{task, trainers, data.train, plan}.run();
  trainers.warm_up.epoch_ended();
  return {epoch, sums.samples ? sums.loss_sum / sums.samples : 0.0,
          std::max(0.0, local_accuracy(t, task, trainers, data.test)), sums.samples,
          local_accuracy(t, task, trainers, data.validation)};
}

/// One trainer for the whole model under a flush schedule, one per stage
/// (sharing the whole model's layers) under 1f1b; a scheduled optimizer
/// counts their steps over epochs of `train_samples`, as the plan counts
/// the stages'.
local_trainers make_trainers(const topology& t, const model::layered_model& whole,
                             int64_t train_samples) {
  local_trainers out;
  out.warm_up = model::warm_up_watch{warm_up_samples(t, t.plan.batch_size)};
  bool flush = flush_schedule(t);
  const auto& stages = section_of(t).stages;
  const auto epoch = model::count_epoch(train_samples, t.plan);
  for (size_t i = 0; i < (flush ? 1 : stages.size()); ++i) {
    auto& trainer =
      out.stages.emplace_back(flush ? whole : whole.slice(stages[i].begin, stages[i].end),
                              t.pretrain.optimizer, model::stash_mode::stash);
    if (t.pretrain.optimizer.scheduled())
      trainer.set_schedule(flush ? epoch.minibatches : epoch.microbatches, t.plan.epochs);
  }
  return out;
}

/// The stages' reports and weights, cut from the whole model at the
/// pipeline's boundaries (the weights from `saved`'s: the best epoch's with
/// save: best, else `whole` itself); the last stage carries the epochs of
/// `trained`.
void report_stages(const topology& t, const model::task& task, model::layered_model& whole,
                   const model::layered_model& saved, int64_t version,
                   const messages::actor_report& trained, job_result& out) {
  const auto& stages = section_of(t).stages;
  for (size_t i = 0; i < stages.size(); ++i) {
    messages::actor_report stage;
    stage.actor = "stage" + std::to_string(i);
    stage.role = "pipeline_stage";
    stage.node = "local";
    auto slice = whole.slice(stages[i].begin, stages[i].end);
    stage.weights_digest = model::weights_digest(slice);
    messages::tensor_set weights{"weights", stage.actor, 0, version, 0, {}, {}};
    for (const auto& p : saved.slice(stages[i].begin, stages[i].end).state())
      weights.tensors.push_back(p.detach());
    out.stage_weights.push_back(std::move(weights));
    if (i + 1 == stages.size()) {
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

/// `t` with the planner's stages when it leaves them to the planner, planned
/// for the cluster the actors would run on (--local-nodes N, its nodes, or
/// none), so that the reference has the stages of the run it is compared to;
/// `settled` gets them as settle_stages gives them.
caf::expected<topology> with_planned_stages(const topology& t, const run_request& r,
                                            std::vector<std::string>& settled) {
  if (!section_of(t).stages_auto)
    return t;
  topology cluster = r.local_nodes > 0 ? with_local_nodes(t, r.local_nodes) : t;
  cluster.link_bandwidth = link_bytes_per_second(r.link);
  auto overrides = settle_stages(cluster);
  if (!overrides)
    return overrides.error();
  settled = std::move(*overrides);
  topology out = t;
  out.mode_spec = cluster.mode_spec;
  return out;
}

/// Where a stage that begins at layer `begin` of `whole` and sent `count`
/// state tensors ends: after the layers that hold them (a stage that sent
/// none: after one layer without state), or past whole.size() when they do
/// not add up.
size_t end_of_state(const model::layered_model& whole, size_t begin, size_t count) {
  // Counted over the stage so far, not layer by layer: a tensor that two of
  // its layers share (tied weights) is one of its state tensors.
  size_t end = begin;
  do {
    if (end == whole.size())
      return whole.size() + 1;
    ++end;
  } while (whole.slice(begin, end).state().size() < count);
  return end;
}

/// `t` with the stages whose weights `result` holds, when its stages were
/// the planner's (settled by the run, not in the topology read again here):
/// cut where each stage's weights end (a layer without weights may go to
/// either side: where is the same model). As `t` when its stages are given
/// or the weights do not add up (save_model says so).
topology with_sent_stages(const topology& t, const job_result& result) {
  auto settings = section_of(t);
  if (!settings.stages_auto || result.stage_weights.empty())
    return t;
  const auto* task = t.find_task(t.task);
  const auto whole = model::make_pretrain_model(t.backbone, task ? task->classes : 10);
  settings.stages.clear();
  for (const auto& sent : result.stage_weights) {
    const size_t begin = settings.stages.empty() ? 0 : settings.stages.back().end;
    const size_t end = result.stage_weights.size() == settings.stages.size() + 1
                         ? whole.size()
                         : end_of_state(whole, begin, sent.tensors.size());
    if (end > whole.size() || end <= begin)
      return t;
    settings.stages.push_back({begin, end, 1, "", {}});
  }
  topology out = t;
  out.mode_spec = settings;
  return out;
}

} // namespace

caf::expected<job_result> run_local(const topology& given, const run_request& r) {
  std::vector<std::string> settled_keys;
  auto settled = with_planned_stages(given, r, settled_keys);
  if (!settled)
    return settled.error();
  const topology& t = *settled;
  // The stages' thread budget by default: then the arithmetic is the same
  // bit for bit (OpenBLAS sums in another order with more threads).
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.compute_threads);
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "task '" + t.task + "' is not a task of the topology");
  try {
    auto started = std::chrono::steady_clock::now();
    auto data = load_data(t, t.data.train_limit);
    if (!data)
      return data.error();
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    if (!t.checkpoint.empty())
      model::load_pretrained_backbone(whole, t.checkpoint); // as the stages do
    auto trainers = make_trainers(t, whole, data->train.size());
    messages::actor_report trained;
    auto training_started = training_starts();
    // The target, the budget and early stopping stop it after an epoch, as
    // they stop the actors' run (which also stops within one at the
    // budget), so that `baton compare` measures its time to target as theirs.
    const auto head = "stage" + std::to_string(section_of(t).stages.size() - 1);
    run_stop stop{t.target_accuracy, t.runtime.stop_after_seconds, 1, t.selection.patience};
    model::best_weights best(t.selection);
    std::map<int32_t, double> epoch_seconds;
    std::optional<early_stop> stopped;
    for (int32_t epoch = 0; epoch < t.plan.epochs && !stopped; ++epoch) {
      const auto& e = trained.epochs.emplace_back(train_epoch(t, *task, trainers, *data, epoch));
      trained.samples += e.samples;
      spdlog::info("local pipeline reference: epoch {} test accuracy {:.2f}%", epoch + 1,
                   100 * e.test_accuracy);
      auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                   training_started.time)
                       .count();
      epoch_seconds[epoch] = seconds;
      best.epoch_end(epoch, e.validation_accuracy, whole.state());
      stopped = stop.epoch(head, epoch, e.test_accuracy, seconds, e.validation_accuracy);
      if (!stopped)
        stopped = stop.time(seconds);
      if (stopped && epoch + 1 < t.plan.epochs)
        spdlog::info("local pipeline reference: {}: stopped after {} of {} epochs",
                     stop_reason(*stopped, t.target_accuracy), epoch + 1, t.plan.epochs);
    }
    auto out = local_result(t, "local", started, training_started);
    set_steady(out, trainers.warm_up.steady());
    out.result_label = "stage";
    out.settled = std::move(settled_keys);
    out.epoch_seconds[head] = epoch_seconds;
    out.stopped = stopped; // as the actors' run records it, at the last epoch too
    // With save: best, the stages' weights of its best epoch.
    auto saved = model::make_pretrain_model(t.backbone, task->classes);
    if (auto ok = put_sent_weights(saved, best.weights().empty() ? whole.state() : best.weights(),
                                   "the local reference"))
      return ok;
    note_best_epoch(out, head, best.best_epoch(), !best.weights().empty());
    report_stages(t, *task, whole, saved, trainers.stages.back().version(), trained, out);
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

caf::expected<void> save_model(const topology& given, const job_result& result,
                               const std::string& path) {
  const topology t = with_sent_stages(given, result);
  const auto* task = t.find_task(t.task);
  const auto& stages = section_of(t).stages;
  if (task == nullptr || result.stage_weights.size() != stages.size())
    return make_error(errc::actor_failed,
                      "cannot save the model: " + std::to_string(result.stage_weights.size()) +
                        " of " + std::to_string(stages.size()) + " stages sent their weights");
  return saving(path, [&] {
    // The stages assembled: a slice shares its layers with the whole model.
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    for (size_t i = 0; i < stages.size(); ++i) {
      auto slice = whole.slice(stages[i].begin, stages[i].end);
      const auto& sent = result.stage_weights[i];
      if (auto err = put_sent_weights(slice, sent.tensors, sent.from))
        return err;
    }
    model::export_model(whole, path, export_options_of(t.backbone, t.data, result));
    return caf::error{};
  });
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
