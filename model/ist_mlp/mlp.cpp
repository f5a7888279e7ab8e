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

/// The names of fc<k>, bn<k> and relu<k> of hidden layer k (1-based).
struct hidden_names {
  std::string fc, bn, relu;
};

hidden_names names_of_hidden(size_t k) {
  const std::string n = std::to_string(k);
  return {"fc" + n, "bn" + n, "relu" + n};
}

/// The output layer's name: fc<L+1> after L hidden layers.
std::string output_name(const shape& shape) {
  return "fc" + std::to_string(shape.hidden.size() + 1);
}

std::vector<named_layer> ist_layers(const shape& shape) {
  std::vector<named_layer> layers;
  layers.push_back(flatten_layer("flatten"));
  int64_t fan_in = shape.inputs;
  for (size_t k = 0; k < shape.hidden.size(); ++k) {
    const auto names = names_of_hidden(k + 1);
    layers.push_back(linear_layer(names.fc.c_str(), fan_in, shape.hidden[k], false));
    layers.push_back(batch_norm_layer(names.bn.c_str(), shape.hidden[k]));
    layers.push_back(relu_layer(names.relu.c_str()));
    fan_in = shape.hidden[k];
  }
  layers.push_back(linear_layer(output_name(shape).c_str(), fan_in, shape.classes, false));
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

layer_listing list_mlp_layers(const model_spec& spec) {
  const auto shape = shape_of(spec);
  check_shape(shape);
  layer_listing out;
  out.names.push_back("flatten");
  for (size_t k = 1; k <= shape.hidden.size(); ++k) {
    auto names = names_of_hidden(k);
    out.names.insert(out.names.end(), {names.fc, names.bn, names.relu});
    out.batch_dependent.push_back(std::move(names.bn));
  }
  out.names.push_back(output_name(shape));
  out.names.push_back("norm");
  out.batch_dependent.push_back("norm");
  return out;
}

} // namespace baton::model::ist
