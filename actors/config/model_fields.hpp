#pragma once

// The field lists (inspect, actors/config/yaml_codec.hpp) of the model's
// plain settings that role settings nest: a model, an optimizer, a task.
// In namespace baton::model, where the codec finds them by ADL. They check
// nothing a role would not: each role checks what it needs of them.

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/specs.hpp"

namespace baton::model {

/// name, classes, features, in_channels, wide_features, hidden, path, classifier, seed.
template <class Inspector>
void inspect(Inspector& f, model_spec& x) {
  f.field("name", x.name);
  f.field("classes", x.classes);
  f.optional_field("features", x.features); // a head's input width; absent before it was measured
  f.field("in_channels", x.in_channels);
  f.optional_field("in_height", x.in_height); // absent in settings written before data shapes
  f.optional_field("in_width", x.in_width);
  f.field("wide_features", x.wide_features);
  f.optional_field("hidden", x.hidden); // absent in settings written before ist_mlp
  f.field("path", x.path);
  f.optional_field("classifier", x.classifier); // absent in settings written before it
  f.field("seed", x.seed);
}

/// A split's files: x, y.
template <class Inspector>
void inspect(Inspector& f, data_spec::split_files& x) {
  f.field("x", x.x);
  f.field("y", x.y);
}

/// crop, flip.
template <class Inspector>
void inspect(Inspector& f, data_spec::augment_spec& x) {
  f.field("crop", x.crop).at_least(0);
  f.field("flip", x.flip);
}

/// kind, path, train, test, label, shape ([C, H, W] or empty), classes,
/// mean, std, the limits and synthetic sizes, memory_mb, seed, then
/// (optional: settings of a baton before them have none) validation and
/// augment.
template <class Inspector>
void inspect(Inspector& f, data_spec& x) {
  f.field("kind", x.kind)
    .one_of({"fashion-mnist", "idx", "cifar10", "cifar100", "npy", "image-folder", "synthetic"});
  f.field("path", x.path);
  f.field("train", x.train);
  f.field("test", x.test);
  f.field("label", x.label);
  f.field("shape", x.shape)
    .check([](const std::vector<int64_t>& shape) { return shape.empty() || shape.size() == 3; },
           "[C, H, W]");
  f.field("classes", x.classes).at_least(0);
  f.field("mean", x.mean);
  f.field("std", x.std);
  f.field("train_limit", x.train_limit).at_least(0);
  f.field("test_limit", x.test_limit).at_least(0);
  f.field("synthetic_train", x.synthetic_train).at_least(0);
  f.field("synthetic_test", x.synthetic_test).at_least(0);
  f.field("memory_mb", x.memory_mb).at_least(0);
  f.field("seed", x.seed);
  f.optional_field("validation", x.validation)
    .check([](double v) { return v >= 0 && v < 1; }, "a fraction from 0 to below 1");
  f.optional_field("augment", x.augment);
}

/// lr, momentum, weight_decay, then (optional: settings of a baton before
/// the optimizer section are SGD's) name, nesterov, betas, eps, the
/// schedule and clip_grad_norm. model::check_optimizer checks the whole.
template <class Inspector>
void inspect(Inspector& f, optimizer_spec& x) {
  f.field("lr", x.lr);
  f.field("momentum", x.momentum);
  f.field("weight_decay", x.weight_decay);
  f.optional_field("name", x.name).one_of({"sgd", "adam", "adamw"});
  f.optional_field("nesterov", x.nesterov);
  f.optional_field("beta1", x.beta1);
  f.optional_field("beta2", x.beta2);
  f.optional_field("eps", x.eps);
  f.optional_field("schedule", x.schedule).one_of({"constant", "step", "cosine"});
  f.optional_field("warmup_epochs", x.warmup_epochs).at_least(0.0);
  f.optional_field("step_epochs", x.step_epochs);
  f.optional_field("gamma", x.gamma);
  f.optional_field("min_lr", x.min_lr).at_least(0.0);
  f.optional_field("clip_grad_norm", x.clip_grad_norm).at_least(0.0);
}

/// name and labels (the label map); the classes follow from the labels, and
/// make_task refuses a map that is not one.
template <class Inspector>
void inspect(Inspector& f, task& x) {
  f.field("name", x.name);
  f.field("labels", [&] { return x.label_map; },
          [&](std::vector<int64_t> labels) { x = make_task(x.name, std::move(labels)); });
}

} // namespace baton::model
