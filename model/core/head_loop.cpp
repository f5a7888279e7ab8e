#include "model/core/head_loop.hpp"

#include <torch/torch.h>

#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/task.hpp"

namespace baton::model {

namespace {

/// Optimiser steps between two progress reports.
constexpr int32_t progress_every = 20;

bool last_in_step(const epoch_plan& p, size_t i) {
  return i + 1 == p.microbatches.size() || p.step_of[i + 1] != p.step_of[i];
}

/// Records one microbatch's loss; reports progress every `progress_every` steps.
void account(head_run& run, double loss, int64_t samples, bool step_done, int32_t step,
             int32_t epoch, const progress_fn& progress) {
  run.epoch_loss += loss * static_cast<double>(samples);
  run.epoch_samples += samples;
  run.recent_loss += loss * static_cast<double>(samples);
  run.recent_samples += samples;
  run.result.samples += samples;
  if (step_done && (step + 1) % progress_every == 0) {
    if (progress)
      progress(run.spec.name, epoch, run.result.samples,
               run.recent_loss / static_cast<double>(run.recent_samples));
    run.recent_loss = 0;
    run.recent_samples = 0;
  }
}

} // namespace

head_run::head_run(const head_spec& s, layered_model m)
    : spec(s), trainer(std::move(m), s.task_def, s.optimizer) {}

void train_heads(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
                 const dataset& train, const batch_plan& plan, int32_t epoch,
                 const progress_fn& progress) {
  const epoch_plan p = plan_epoch(train.size(), plan, epoch);
  for (auto& run : runs) {
    run->epoch_loss = 0;
    run->epoch_samples = 0;
  }
  for (size_t i = 0; i < p.microbatches.size(); ++i) {
    auto [images, labels] = gather_training(train, p.microbatches[i], epoch);
    const at::Tensor features = backbone.features(images, p.microbatches[i], false);
    const bool step_done = last_in_step(p, i);
    for (auto& run : runs) {
      const double loss = run->trainer.train(features, apply(run->spec.task_def, labels),
                                             p.step_size_of[i], step_done);
      account(*run, loss, images.size(0), step_done, p.step_of[i], epoch, progress);
    }
  }
  for (auto& run : runs)
    run->result.train_loss.push_back(
        run->epoch_samples > 0 ? run->epoch_loss / static_cast<double>(run->epoch_samples)
                               : 0.0);
}

std::vector<double> head_accuracies(frozen_backbone& backbone,
                                    std::vector<std::unique_ptr<head_run>>& runs,
                                    const dataset& data, int64_t batch_size, int64_t first_id) {
  std::vector<int64_t> correct(runs.size(), 0);
  int64_t total = 0;
  for (auto ids : plan_eval(data.size(), batch_size)) {
    auto [images, labels] = gather(data, ids);
    for (auto& id : ids)
      id += first_id;
    const at::Tensor features = backbone.features(images, ids, true);
    for (size_t h = 0; h < runs.size(); ++h)
      correct[h] += runs[h]->trainer.correct(features, apply(runs[h]->spec.task_def, labels));
    total += images.size(0);
  }
  std::vector<double> out;
  for (size_t h = 0; h < runs.size(); ++h)
    out.push_back(total > 0 ? static_cast<double>(correct[h]) / static_cast<double>(total)
                            : 0.0);
  return out;
}

void evaluate_heads(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
                    const dataset& test, int64_t batch_size) {
  const auto accuracies = head_accuracies(backbone, runs, test, batch_size);
  for (size_t h = 0; h < runs.size(); ++h)
    runs[h]->result.test_accuracy.push_back(accuracies[h]);
}

} // namespace baton::model
