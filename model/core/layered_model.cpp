#include "model/core/layered_model.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "model/core/digest.hpp"
#include "model/core/error.hpp"
#include "model/core/freezing.hpp"
#include "model/core/layer_listing.hpp"
#include "model/core/model_parts.hpp"

namespace baton::model {

namespace {

/// "[2, 1, 28, 28]".
std::string shape_text(const at::Tensor& x) {
  std::ostringstream out;
  out << x.sizes();
  return out.str();
}

} // namespace

// -- layered_model --------------------------------------------------------------

layered_model::layered_model(std::vector<named_layer> layers) : layers_(std::move(layers)) {
  std::set<std::string> seen;
  for (const auto& layer : layers_) {
    TORCH_CHECK(!layer.module.is_empty(), "layered_model: layer '", layer.name, "' is empty");
    TORCH_CHECK(seen.insert(layer.name).second, "layered_model: duplicate layer name '",
                layer.name, "' (checkpoint keys would collide)");
  }
}

at::Tensor layered_model::forward(at::Tensor x) const {
  for (const auto& layer : layers_) {
    // AnyModule::forward is not const although it only calls through the
    // shared module; layered_model's constness is shallow like a torch module's.
    x = const_cast<torch::nn::AnyModule&>(layer.module).forward(std::move(x));
  }
  return x;
}

layered_model layered_model::slice(size_t begin, size_t end) const {
  TORCH_CHECK(begin <= end && end <= layers_.size(), "layered_model::slice [", begin, ", ",
              end, ") of a model with ", layers_.size(), " layers");
  return layered_model({layers_.begin() + static_cast<std::ptrdiff_t>(begin),
                        layers_.begin() + static_cast<std::ptrdiff_t>(end)});
}

int64_t layered_model::index_of(const std::string& name) const {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

std::vector<std::string> layered_model::layer_names() const {
  std::vector<std::string> names;
  for (const auto& layer : layers_)
    names.push_back(layer.name);
  return names;
}

namespace {

/// What makes two tensors one: their storage. Undefined tensors (a layer
/// without a bias) are never one with another.
const void* storage_of(const at::Tensor& t) {
  return t.defined() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes().equals(b.sizes()) &&
         a.strides().equals(b.strides()) && a.scalar_type() == b.scalar_type();
}

/// `named` tensors of every layer ("layer.key"), each storage once, with the
/// later layers that hold it too.
template <typename Enumerate>
std::vector<model_parameter> dedupe(const std::vector<named_layer>& layers, Enumerate tensors_of) {
  std::vector<model_parameter> out;
  std::map<const void*, size_t> seen; // storage -> index in out
  for (size_t l = 0; l < layers.size(); ++l)
    for (const auto& t : tensors_of(*layers[l].module.ptr())) {
      std::string name = layers[l].name + "." + t.key();
      const void* storage = storage_of(t.value());
      auto found = storage ? seen.find(storage) : seen.end();
      if (found == seen.end()) {
        if (storage)
          seen.emplace(storage, out.size());
        out.push_back({std::move(name), t.value(), l, {}, {}});
        continue;
      }
      auto& first = out[found->second];
      TORCH_CHECK(same_view(first.tensor, t.value()), "layered_model: '", name,
                  "' shares the storage of '", first.name,
                  "' as another view of it (make_model refuses such a model)");
      first.tied_names.push_back(std::move(name));
      first.tied_layers.push_back(l);
    }
  return out;
}

} // namespace

std::vector<model_parameter> layered_model::parameter_table() const {
  return dedupe(layers_, [](const torch::nn::Module& m) { return m.named_parameters(true); });
}

std::vector<std::pair<std::string, at::Tensor>> layered_model::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& p : parameter_table())
    out.emplace_back(std::move(p.name), std::move(p.tensor));
  return out;
}

std::vector<at::Tensor> layered_model::parameters() const {
  std::vector<at::Tensor> out;
  for (auto& p : parameter_table())
    out.push_back(std::move(p.tensor));
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> layered_model::named_buffers() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& b : dedupe(layers_, [](const torch::nn::Module& m) { return m.named_buffers(true); }))
    out.emplace_back(std::move(b.name), std::move(b.tensor));
  return out;
}

std::vector<at::Tensor> layered_model::buffers() const {
  std::vector<at::Tensor> out;
  for (auto& b : named_buffers())
    out.push_back(std::move(b.second));
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> layered_model::named_state() const {
  auto out = named_parameters();
  for (auto& b : named_buffers())
    out.push_back(std::move(b));
  return out;
}

std::vector<at::Tensor> layered_model::state() const {
  auto out = parameters();
  for (auto& b : buffers())
    out.push_back(std::move(b));
  return out;
}

void layered_model::set_trainable(bool trainable) {
  for (auto& p : parameters())
    p.set_requires_grad(trainable);
  if (trainable)
    for (const auto& layer : layers_)
      for (auto p : parameters_frozen_by_file(*layer.module.ptr()))
        p.set_requires_grad(false);
}

void layered_model::train(bool on) {
  for (auto& layer : layers_)
    layer.module.ptr()->train(on);
}

layered_model make_model(const model_spec& spec) {
  if (spec.name == "torchscript") // pretrained: keep the file's weights
    return layered_model(torchscript_layers(spec));
  const model_declaration declaration = declare_model(spec);
  layered_model m(build_layers(declaration));
  initialise(m, spec.seed, declaration.weights);
  return m;
}

at::Tensor probe_input(const model_spec& spec) {
  const std::vector<int64_t> shape{2, spec.in_channels, spec.in_height, spec.in_width};
  const int64_t values = 2 * spec.in_channels * spec.in_height * spec.in_width;
  return torch::sin(torch::arange(values, torch::kFloat32) * 0.37).reshape(shape);
}

int64_t output_features(const layered_model& backbone, const model_spec& spec) {
  std::vector<bool> training;
  for (const auto& layer : backbone.layers())
    training.push_back(layer.module.ptr()->is_training());
  const auto restore = [&] {
    for (size_t i = 0; i < training.size(); ++i)
      backbone.layers()[i].module.ptr()->train(training[i]);
  };
  const at::Tensor probe = probe_input(spec);
  at::Tensor y;
  try {
    torch::NoGradGuard no_grad;
    for (const auto& layer : backbone.layers())
      layer.module.ptr()->train(false); // batch norm's running statistics left alone
    y = backbone.forward(probe);
  } catch (const std::exception& e) {
    restore();
    throw error("model '" + spec.name + "' fails on a probe shaped as the data's samples " +
                shape_text(probe) + ": " + error_reason(e));
  }
  restore();
  if (y.dim() != 2)
    throw error("model '" + spec.name + "' outputs " + shape_text(y) + " for a probe " +
                shape_text(probe) + ", but a backbone outputs [N, features] (end it with "
                "torch.nn.Flatten(), as the built-in backbones do)");
  return y.size(1);
}

namespace {

/// Throws model::error unless `spec` names a backbone.
void check_backbone(const model_spec& spec) {
  const auto& backbones = backbone_models();
  if (std::find(backbones.begin(), backbones.end(), spec.name) != backbones.end())
    return;
  std::string expected;
  for (const auto& name : backbones)
    expected += (expected.empty() ? "" : ", ") + name;
  throw error("model '" + spec.name + "' is not a backbone (expected one of: " + expected + ")");
}

/// The width `measure` finds into `out`, or why it cannot.
template <class Measure>
void measure_features(layer_listing& out, Measure measure) {
  try {
    out.features = measure();
  } catch (const std::exception& e) { // model::error, and anything LibTorch throws
    out.features = 0;
    out.features_error = e.what();
  }
}

} // namespace

int64_t backbone_features(const model_spec& spec) {
  check_backbone(spec);
  if (is_declared(spec.name)) // read, not built: resnet18 would take ~45 MB and a probe
    return declared_features(declare_model(spec));
  return output_features(make_model(spec), spec);
}

std::vector<layer_tie> layer_ties(const layered_model& m) {
  std::vector<layer_tie> out;
  for (const auto& p : m.parameter_table())
    for (size_t i = 0; i < p.tied_layers.size(); ++i)
      if (p.tied_layers[i] != p.layer)
        out.push_back({p.layer, p.tied_layers[i], m.layers()[p.layer].name,
                       m.layers()[p.tied_layers[i]].name, p.name, p.tied_names[i]});
  return out;
}

layer_listing listing_of(const layered_model& m) {
  return {m.layer_names(), layer_ties(m), batch_dependent_layers(m), 0, {}};
}

layer_listing list_layers(const model_spec& spec, with_features features) {
  if (is_declared(spec.name)) { // read, not built
    const model_declaration declaration = declare_model(spec);
    layer_listing out = listing_of(declaration);
    if (features == with_features::yes)
      measure_features(out, [&] {
        check_backbone(spec);
        return declared_features(declaration);
      });
    return out;
  }
  try {
    const layered_model m = make_model(spec);
    layer_listing out = listing_of(m);
    if (features == with_features::yes)
      measure_features(out, [&] {
        check_backbone(spec);
        return output_features(m, spec);
      });
    return out;
  } catch (const c10::Error& e) {
    throw error(e.what_without_backtrace());
  }
}

int64_t parameter_count(const layered_model& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters())
    n += p.numel();
  return n;
}

std::string weights_digest(const layered_model& m) {
  sha256 digest;
  for (const auto& p : m.named_parameters()) {
    auto bytes = p.second.detach().contiguous();
    digest.update(bytes.data_ptr(), bytes.nbytes());
  }
  return digest.hex();
}

} // namespace baton::model
