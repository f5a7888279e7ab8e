#pragma once

// The small models the data-parallel, freezing and feature-cache suites
// train (784 -> 32 -> 24 -> 10), so that every run takes milliseconds, and
// the settings of a named model for the suites that build one.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/core/layered_model.hpp"

namespace baton::model::testing {

/// The settings of the model `name` ("convnet", "resnet18") with `seed` and
/// `classes`; resnet18 takes 3 input channels (torchvision's stem).
inline model_spec spec_of(const std::string& name, uint64_t seed, int64_t classes = 10) {
  model_spec spec;
  spec.name = name;
  spec.seed = seed;
  spec.classes = classes;
  if (name == "resnet18")
    spec.in_channels = 3;
  return spec;
}

/// Batch norm after fc1: none, with running statistics, or with batch
/// statistics only (which a feature cache must refuse to hold).
enum class tiny_norm { none, running, batch_only };

/// flatten fc1 [bn1] relu1 fc2 relu2 fc3, seeded: the same weights each call.
inline layered_model tiny_norm_model(tiny_norm norm) {
  torch::manual_seed(5);
  std::vector<named_layer> layers;
  layers.push_back({"flatten", torch::nn::AnyModule(torch::nn::Flatten())});
  layers.push_back({"fc1", torch::nn::AnyModule(torch::nn::Linear(784, 32))});
  if (norm != tiny_norm::none)
    layers.push_back({"bn1", torch::nn::AnyModule(torch::nn::BatchNorm1d(
                               torch::nn::BatchNorm1dOptions(32).track_running_stats(
                                 norm == tiny_norm::running)))});
  layers.push_back({"relu1", torch::nn::AnyModule(torch::nn::ReLU())});
  layers.push_back({"fc2", torch::nn::AnyModule(torch::nn::Linear(32, 24))});
  layers.push_back({"relu2", torch::nn::AnyModule(torch::nn::ReLU())});
  layers.push_back({"fc3", torch::nn::AnyModule(torch::nn::Linear(24, 10))});
  return layered_model(std::move(layers));
}

/// The tiny model without batch norm.
inline layered_model tiny_model() {
  return tiny_norm_model(tiny_norm::none);
}

/// With batch norm after fc1 (running statistics).
inline layered_model bn_model() {
  return tiny_norm_model(tiny_norm::running);
}

/// With batch statistics only, which a feature cache must refuse.
inline layered_model batch_only_bn_model() {
  return tiny_norm_model(tiny_norm::batch_only);
}

/// A linear layer whose weight is another layer's tensor (tied weights,
/// as `self.b.weight = self.d.weight` in PyTorch), with a bias of its own.
struct tied_linear_impl : torch::nn::Module {
  tied_linear_impl(at::Tensor shared_weight, int64_t out) {
    weight = register_parameter("weight", std::move(shared_weight));
    bias = register_parameter("bias", torch::full({out}, 0.01));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::linear(x, weight, bias); }
  at::Tensor weight, bias;
};
TORCH_MODULE_IMPL(tied_linear, tied_linear_impl);

/// flatten fc1 relu1 fc2 relu2 fc2b relu3 fc3 (784 -> 32 -> 32 -> 32 -> 10),
/// fc2b's weight fc2's own tensor; seeded: the same weights each call.
inline layered_model tied_model() {
  torch::manual_seed(7);
  torch::nn::Linear fc2(32, 32);
  std::vector<named_layer> layers;
  layers.push_back({"flatten", torch::nn::AnyModule(torch::nn::Flatten())});
  layers.push_back({"fc1", torch::nn::AnyModule(torch::nn::Linear(784, 32))});
  layers.push_back({"relu1", torch::nn::AnyModule(torch::nn::ReLU())});
  layers.push_back({"fc2", torch::nn::AnyModule(fc2)});
  layers.push_back({"relu2", torch::nn::AnyModule(torch::nn::ReLU())});
  layers.push_back({"fc2b", torch::nn::AnyModule(tied_linear(fc2->weight, 32))});
  layers.push_back({"relu3", torch::nn::AnyModule(torch::nn::ReLU())});
  layers.push_back({"fc3", torch::nn::AnyModule(torch::nn::Linear(32, 10))});
  return layered_model(std::move(layers));
}

} // namespace baton::model::testing
