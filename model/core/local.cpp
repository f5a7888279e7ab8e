#include "model/core/local.hpp"

#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"

namespace baton::model {

namespace {

/// Optimiser steps between two progress reports.
constexpr int32_t progress_every = 20;

/// One head's trainer and running statistics in run_transfer_local.
struct head_run {
  head_run(const head_spec& s, layered_model m)
      : spec(s), trainer(std::move(m), s.task_def, s.optimizer) {}
  const head_spec& spec;
  head_trainer trainer;
  head_result result;
  double epoch_loss = 0;        // sum of microbatch mean loss x samples
  int64_t epoch_samples = 0;
  double recent_loss = 0;       // the same since the last progress report
  int64_t recent_samples = 0;
};

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

/// One epoch: each microbatch goes through the backbone once and its features
/// are given to every head in turn.
void train_epoch(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
                 const dataset& train, const batch_plan& plan, int32_t epoch,
                 const progress_fn& progress) {
  const epoch_plan p = plan_epoch(train.size(), plan, epoch);
  for (auto& run : runs) {
    run->epoch_loss = 0;
    run->epoch_samples = 0;
  }
  for (size_t i = 0; i < p.microbatches.size(); ++i) {
    auto [images, labels] = gather(train, p.microbatches[i]);
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

/// Test accuracy of every head on the frozen backbone's features.
void evaluate(frozen_backbone& backbone, std::vector<std::unique_ptr<head_run>>& runs,
              const dataset& test, int64_t batch_size) {
  std::vector<int64_t> correct(runs.size(), 0);
  int64_t total = 0;
  for (const auto& ids : plan_eval(test.size(), batch_size)) {
    auto [images, labels] = gather(test, ids);
    const at::Tensor features = backbone.features(images, ids, true);
    for (size_t h = 0; h < runs.size(); ++h)
      correct[h] += runs[h]->trainer.correct(features, apply(runs[h]->spec.task_def, labels));
    total += images.size(0);
  }
  for (size_t h = 0; h < runs.size(); ++h)
    runs[h]->result.test_accuracy.push_back(
        total > 0 ? static_cast<double>(correct[h]) / static_cast<double>(total) : 0.0);
}

void check_plan(const batch_plan& plan) {
  if (plan.batch_size <= 0 || plan.microbatches <= 0 || plan.epochs < 0)
    throw error("batch plan: expected batch_size > 0, microbatches > 0 and epochs >= 0, got " +
                std::to_string(plan.batch_size) + ", " + std::to_string(plan.microbatches) +
                ", " + std::to_string(plan.epochs));
}

} // namespace

uint64_t derive_seed(uint64_t base, const std::string& name) {
  // FNV-1a over the name's bytes, started from the base seed's bytes, then a
  // SplitMix64 finaliser so that similar names give unrelated seeds.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; ++i) {
    h ^= (base >> (8 * i)) & 0xff;
    h *= 0x100000001b3ULL;
  }
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

epoch_plan plan_epoch(int64_t dataset_size, const batch_plan& plan, int32_t epoch) {
  check_plan(plan);
  const std::vector<int64_t> order = epoch_order(dataset_size, plan.seed, epoch);
  const auto n = static_cast<int64_t>(order.size());
  epoch_plan out;
  int32_t step = 0;
  for (int64_t begin = 0; begin < n; begin += plan.batch_size, ++step) {
    const int64_t size = std::min(plan.batch_size, n - begin);
    const auto parts = static_cast<int32_t>(std::min<int64_t>(plan.microbatches, size));
    // `parts` contiguous pieces; the first size % parts are one larger.
    int64_t at = begin;
    for (int32_t k = 0; k < parts; ++k) {
      const int64_t piece = size / parts + (k < size % parts ? 1 : 0);
      out.microbatches.emplace_back(order.begin() + at, order.begin() + at + piece);
      out.step_of.push_back(step);
      out.step_size_of.push_back(parts);
      at += piece;
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> plan_eval(int64_t dataset_size, int64_t batch_size) {
  if (batch_size <= 0)
    throw error("evaluation plan: expected batch_size > 0, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> out;
  for (int64_t begin = 0; begin < dataset_size; begin += batch_size) {
    std::vector<int64_t> ids;
    for (int64_t i = begin; i < std::min(dataset_size, begin + batch_size); ++i)
      ids.push_back(i);
    out.push_back(std::move(ids));
  }
  return out;
}

std::vector<head_result> run_transfer_local(const layered_model& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress) {
  frozen_backbone frozen{backbone, {}};
  return run_transfer_local(frozen, heads, train, test, plan, progress);
}

std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress) {
  check_plan(plan);
  std::vector<std::unique_ptr<head_run>> runs;
  for (const auto& spec : heads) {
    if (spec.model.classes < spec.task_def.classes)
      throw error("head '" + spec.name + "': model has " + std::to_string(spec.model.classes) +
                  " outputs, expected at least the " + std::to_string(spec.task_def.classes) +
                  " classes of task '" + spec.task_def.name + "'");
    runs.push_back(std::make_unique<head_run>(spec, make_model(spec.model)));
    runs.back()->result.name = spec.name;
    runs.back()->result.task = spec.task_def.name;
  }
  for (int32_t epoch = 0; epoch < plan.epochs; ++epoch) {
    train_epoch(backbone, runs, train, plan, epoch, progress);
    evaluate(backbone, runs, test, plan.batch_size);
    backbone.end_epoch();
  }
  std::vector<head_result> results;
  for (auto& run : runs) {
    run->result.weights_digest = weights_digest(run->trainer.model());
    results.push_back(std::move(run->result));
  }
  return results;
}

layered_model make_pretrain_model(const model_spec& backbone, int64_t classes) {
  auto layers = make_model(backbone).layers();
  model_spec classifier;
  classifier.name = "classifier";
  classifier.classes = classes;
  classifier.features = backbone_features(backbone);
  classifier.seed = derive_seed(backbone.seed, "fc2");
  const layered_model head = make_model(classifier);
  layers.insert(layers.end(), head.layers().begin(), head.layers().end());
  return layered_model(std::move(layers));
}

double pretrain(const pretrain_spec& spec, const dataset& train, const dataset& test,
                const progress_fn& progress) {
  check_plan(spec.plan);
  // The whole model is the "head": every layer trainable, same arithmetic as
  // the transfer heads, fed with images instead of features.
  head_spec whole;
  whole.name = "pretrain";
  whole.task_def = spec.task_def;
  whole.optimizer = spec.optimizer;
  std::vector<std::unique_ptr<head_run>> runs;
  runs.push_back(std::make_unique<head_run>(
      whole, make_pretrain_model(spec.backbone, spec.task_def.classes)));
  frozen_backbone identity{layered_model{}, {}}; // no layers: forward returns its input
  for (int32_t epoch = 0; epoch < spec.plan.epochs; ++epoch)
    train_epoch(identity, runs, train, spec.plan, epoch, progress);
  evaluate(identity, runs, test, spec.plan.batch_size);
  save_checkpoint(runs.front()->trainer.model(), spec.out_path);
  return runs.front()->result.test_accuracy.back();
}

} // namespace baton::model
