#include "model/ist_mlp/mlp.hpp"

#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"
#include "model/ist_mlp/network.hpp"

namespace baton::model::ist {

namespace {

shape shape_of(const model_spec& spec) {
  if (spec.classes <= 0)
    throw error("model '" + spec.name + "': expected classes > 0, got " +
                std::to_string(spec.classes));
  shape shape;
  shape.inputs = spec.in_channels * spec.in_height * spec.in_width;
  shape.hidden = spec.hidden;
  shape.classes = spec.classes;
  return shape;
}

std::vector<named_layer> ist_layers(const shape& shape) {
  std::vector<named_layer> layers;
  layers.push_back(flatten_layer("flatten"));
  int64_t fan_in = shape.inputs;
  for (size_t k = 0; k < shape.hidden.size(); ++k) {
    const std::string n = std::to_string(k + 1);
    layers.push_back(linear_layer(("fc" + n).c_str(), fan_in, shape.hidden[k], false));
    layers.push_back(batch_norm_layer(("bn" + n).c_str(), shape.hidden[k]));
    layers.push_back(relu_layer(("relu" + n).c_str()));
    fan_in = shape.hidden[k];
  }
  const std::string out = "fc" + std::to_string(shape.hidden.size() + 1);
  layers.push_back(linear_layer(out.c_str(), fan_in, shape.classes, false));
  layers.push_back({"norm", torch::nn::AnyModule(torch::nn::BatchNorm1d(
                                torch::nn::BatchNorm1dOptions(shape.classes)
                                    .affine(false)
                                    .track_running_stats(false)))});
  return layers;
}

} // namespace

layered_model make_mlp(const model_spec& spec) {
  const auto shape = shape_of(spec);
  const auto source = make_network(shape, spec.seed); // checks the shape
  layered_model m(ist_layers(shape));
  torch::NoGradGuard no_grad;
  auto params = m.parameters();
  const auto values = source.parameters();
  TORCH_CHECK(params.size() == values.size(), "ist_mlp: parameter count mismatch");
  for (size_t i = 0; i < params.size(); ++i)
    params[i].copy_(values[i]);
  return m;
}

} // namespace baton::model::ist
