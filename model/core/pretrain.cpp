#include "model/core/pretrain.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/core/architecture.hpp"
#include "model/core/batches.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/head_loop.hpp"
#include "model/core/layer_listing.hpp"
#include "model/core/log_once.hpp"
#include "model/core/task.hpp"

namespace baton::model {

layer_listing list_pretrain_layers(const model_spec& backbone, int64_t classes) {
  if (!is_declared(backbone.name)) // a TorchScript file ending in the logits gets no fc2
    return listing_of(make_pretrain_model(backbone, classes));
  model_declaration whole = declare_model(backbone);
  const auto classifier = declare_model(pretrain_classifier(declared_features(whole), classes));
  whole.layers.insert(whole.layers.end(), classifier.layers.begin(), classifier.layers.end());
  return listing_of(whole);
}

layered_model make_pretrain_model(const model_spec& backbone, int64_t classes) {
  const layered_model body = make_model(backbone);
  const int64_t features = output_features(body, backbone);
  // A user's model that already ends in the task's logits is trained as
  // given: a Linear on top of its logits trained far worse (issue 35).
  if (backbone.name == "torchscript" && features == classes && backbone.classifier != "append") {
    log_once("model: " + backbone.path + " ends in " + std::to_string(features) +
             " outputs, the task's classes: trained as given, no classifier appended");
    return body;
  }
  if (backbone.name == "torchscript")
    log_once("model: " + backbone.path + " ends in " + std::to_string(features) +
             (backbone.classifier == "append"
                ? " outputs and backbone.classifier is append"
                : " features, the task has " + std::to_string(classes) + " classes") +
             ": classifier fc2 appended, Linear(" + std::to_string(features) + " -> " +
             std::to_string(classes) + ")");
  auto layers = body.layers();
  model_spec classifier = pretrain_classifier(features, classes);
  classifier.seed = derive_seed(backbone.seed, "fc2");
  const layered_model head = make_model(classifier);
  layers.insert(layers.end(), head.layers().begin(), head.layers().end());
  return layered_model(std::move(layers));
}

double pretrain(const pretraining_settings& spec, const dataset& train, const dataset& test,
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
  // The schedule's steps: one per minibatch, a last partial one kept (plan_epoch).
  runs.front()->trainer.set_schedule(count_epoch(train.size(), spec.plan).minibatches,
                                     spec.plan.epochs);
  frozen_backbone identity{layered_model{}, {}}; // no layers: forward returns its input
  for (int32_t epoch = 0; epoch < spec.plan.epochs; ++epoch)
    train_heads(identity, runs, train, spec.plan, epoch, progress);
  evaluate_heads(identity, runs, test, spec.plan.batch_size);
  // NaN or inf weights are no backbone (issue 32 item 11): nothing is written.
  const auto& losses = runs.front()->result.train_loss;
  for (size_t epoch = 0; epoch < losses.size(); ++epoch)
    if (!std::isfinite(losses[epoch]))
      throw error("the training loss of epoch " + std::to_string(epoch + 1) +
                  " is not finite, so the weights are not finite either: " + spec.out_path +
                  " is not written (the warning above says where the first NaN or inf came "
                  "from; if the weights diverged, lower backbone.pretrain.optimizer.lr)");
  save_checkpoint(runs.front()->trainer.model(), spec.out_path, spec.settings);
  return runs.front()->result.test_accuracy.back();
}

double most_frequent_share(const task& t, const dataset& d) {
  const int64_t n = d.size();
  if (n == 0 || t.classes <= 0)
    return 0;
  // The task's classes as its training sees them (apply: the label map).
  const at::Tensor counts = apply(t, d.labels).bincount({}, t.classes);
  return static_cast<double>(counts.max().item<int64_t>()) / static_cast<double>(n);
}

} // namespace baton::model
