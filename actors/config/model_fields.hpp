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

/// name, classes, in_channels, wide_features, hidden, path, seed (not
/// `features`, which role settings have never carried).
template <class Inspector>
void inspect(Inspector& f, model_spec& x) {
  f.field("name", x.name);
  f.field("classes", x.classes);
  f.field("in_channels", x.in_channels);
  f.field("wide_features", x.wide_features);
  f.optional_field("hidden", x.hidden); // absent in settings written before ist_mlp
  f.field("path", x.path);
  f.field("seed", x.seed);
}

/// lr, momentum, weight_decay.
template <class Inspector>
void inspect(Inspector& f, optimizer_spec& x) {
  f.field("lr", x.lr);
  f.field("momentum", x.momentum);
  f.field("weight_decay", x.weight_decay);
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
