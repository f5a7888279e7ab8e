#include "model/layered_model.hpp"

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include <openssl/evp.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::model {

// -- a TorchScript child as a layer ------------------------------------------

/// One top-level child of a TorchScript model, run through the interpreter.
/// Its parameters are registered again (same tensors, not copies) under a
/// mirror of the child's module tree, so that named_parameters(), checkpoints
/// and optimisers see and update exactly the tensors the interpreter uses.
class ScriptLayerImpl : public torch::nn::Module {
public:
  explicit ScriptLayerImpl(torch::jit::Module module) : module_(std::move(module)) {
    mirror(*this, module_);
  }

  torch::Tensor forward(torch::Tensor x) { return module_.forward({std::move(x)}).toTensor(); }

  void train(bool on = true) override {
    module_.train(on);
    torch::nn::Module::train(on);
  }

private:
  static void mirror(torch::nn::Module& target, const torch::jit::Module& source) {
    for (const auto& p : source.named_parameters(/*recurse=*/false))
      target.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& child : source.named_children()) {
      auto sub = std::make_shared<torch::nn::Module>();
      mirror(*sub, child.value);
      target.register_module(child.name, sub);
    }
  }

  torch::jit::Module module_;
};
TORCH_MODULE(ScriptLayer);

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

std::vector<std::pair<std::string, at::Tensor>> layered_model::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& layer : layers_)
    for (const auto& p : layer.module.ptr()->named_parameters(/*recurse=*/true))
      out.emplace_back(layer.name + "." + p.key(), p.value());
  return out;
}

std::vector<at::Tensor> layered_model::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : layers_)
    for (const auto& p : layer.module.ptr()->parameters(/*recurse=*/true))
      out.push_back(p);
  return out;
}

void layered_model::set_trainable(bool trainable) {
  for (auto& p : parameters())
    p.set_requires_grad(trainable);
}

void layered_model::train(bool on) {
  for (auto& layer : layers_)
    layer.module.ptr()->train(on);
}

// -- deterministic initialisation ------------------------------------------------

namespace {

/// SplitMix64's finaliser: decorrelates nearby seeds before they seed the twister.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Fills `t` (float, contiguous) with uniform values in [-bound, bound) from
/// `rng`, in element order: the same on every machine.
void fill_uniform(at::Tensor& t, double bound, std::mt19937_64& rng) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "initialisation expects contiguous float parameters");
  float* data = t.data_ptr<float>();
  const auto b = static_cast<float>(bound);
  for (int64_t i = 0; i < t.numel(); ++i) {
    // top 24 bits -> [0, 1) exactly in float
    const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
    data[i] = (2.0f * u - 1.0f) * b;
  }
}

/// Re-initialises every parameter of `m` from `seed` alone, as PyTorch's
/// defaults do in distribution (uniform +-1/sqrt(fan_in) for weights and
/// biases of linear and convolution layers; ones and zeros for normalisation),
/// but from a local generator: modules are built concurrently in several
/// threads, and the global torch generator would make the weights depend on
/// the interleaving.
void initialise(layered_model& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(mix64(seed));
  for (const auto& layer : m.layers()) {
    for (const auto& module : layer.module.ptr()->modules(/*include_self=*/true)) {
      auto params = module->named_parameters(/*recurse=*/false);
      auto* weight = params.find("weight");
      auto* bias = params.find("bias");
      if (weight && weight->dim() >= 2) {
        const double bound = 1.0 / std::sqrt(static_cast<double>((*weight)[0].numel()));
        fill_uniform(*weight, bound, rng);
        if (bias)
          fill_uniform(*bias, bound, rng);
      } else if (weight) {
        weight->fill_(1.0);
        if (bias)
          bias->zero_();
      }
    }
  }
}

// -- the reference models ----------------------------------------------------------

using torch::nn::AnyModule;

named_layer conv_layer(const char* name, int64_t in, int64_t out) {
  return {name, AnyModule(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))};
}
named_layer linear_layer(const char* name, int64_t in, int64_t out, bool bias = true) {
  return {name, AnyModule(torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)))};
}
named_layer relu_layer(const char* name) { return {name, AnyModule(torch::nn::ReLU())}; }
named_layer pool_layer(const char* name) {
  return {name, AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)))};
}
named_layer flatten_layer(const char* name) { return {name, AnyModule(torch::nn::Flatten())}; }
named_layer batch_norm_layer(const char* name, int64_t features) {
  return {name, AnyModule(torch::nn::BatchNorm1d(
                    torch::nn::BatchNorm1dOptions(features).track_running_stats(false)))};
}

/// The convnet backbone up to its flatten (28x28 input -> 128x3x3 = 1152).
std::vector<named_layer> convnet_trunk(int64_t in_channels) {
  return {conv_layer("conv1", in_channels, 32), relu_layer("relu1"),
          conv_layer("conv2", 32, 32),          relu_layer("relu2"),
          pool_layer("pool1"),                  conv_layer("conv3", 32, 64),
          relu_layer("relu3"),                  conv_layer("conv4", 64, 64),
          relu_layer("relu4"),                  pool_layer("pool2"),
          conv_layer("conv5", 64, 128),         relu_layer("relu5"),
          pool_layer("pool3"),                  flatten_layer("flatten")};
}

constexpr int64_t convnet_flat = 128 * 3 * 3;
constexpr int64_t backbone_features = 256;

std::vector<named_layer> convnet(const model_spec& spec) {
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat, backbone_features));
  layers.push_back(relu_layer("relu6"));
  return layers;
}

std::vector<named_layer> convnet_wide(const model_spec& spec) {
  if (spec.wide_features <= 0)
    throw error("model 'convnet_wide': expected wide_features > 0, got " +
                std::to_string(spec.wide_features));
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat, spec.wide_features));
  layers.push_back(relu_layer("relu6"));
  layers.push_back(linear_layer("fc1b", spec.wide_features, backbone_features));
  layers.push_back(relu_layer("relu7"));
  return layers;
}

std::vector<named_layer> head(const model_spec& spec) {
  std::vector<named_layer> layers;
  layers.push_back(linear_layer("fc1", backbone_features, 128));
  layers.push_back(relu_layer("relu1"));
  layers.push_back(linear_layer("fc2", 128, spec.classes));
  return layers;
}

/// 784 -> 4096 -> 4096 -> 10, batch norm without running statistics (so that
/// training and evaluation compute the same function) and no biases.
std::vector<named_layer> mlp(const model_spec& spec) {
  constexpr int64_t hidden = 4096;
  std::vector<named_layer> layers;
  layers.push_back(flatten_layer("flatten"));
  layers.push_back(linear_layer("fc1", 28 * 28 * spec.in_channels, hidden, false));
  layers.push_back(batch_norm_layer("bn1", hidden));
  layers.push_back(relu_layer("relu1"));
  layers.push_back(linear_layer("fc2", hidden, hidden, false));
  layers.push_back(batch_norm_layer("bn2", hidden));
  layers.push_back(relu_layer("relu2"));
  layers.push_back(linear_layer("fc3", hidden, spec.classes, false));
  return layers;
}

std::vector<named_layer> torchscript(const model_spec& spec) {
  if (spec.path.empty() || !std::filesystem::is_regular_file(spec.path))
    throw error("model 'torchscript': file '" + spec.path +
                "' not found (expected a TorchScript archive from torch.jit.save)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(spec.path);
  } catch (const c10::Error& e) {
    throw error(spec.path + ": not a readable TorchScript archive (" + e.what_without_backtrace() +
                ")");
  }
  std::vector<named_layer> layers;
  for (const auto& child : module.named_children())
    layers.push_back({child.name, AnyModule(ScriptLayer(child.value))});
  if (layers.empty())
    throw error(spec.path + ": the TorchScript model has no child modules, expected its layers "
                            "as top-level children");
  return layers;
}

} // namespace

layered_model make_model(const model_spec& spec) {
  if ((spec.name == "classifier" || spec.name == "head" || spec.name == "mlp") &&
      spec.classes <= 0)
    throw error("model '" + spec.name + "': expected classes > 0, got " +
                std::to_string(spec.classes));
  if (spec.name == "torchscript") // pretrained: keep the file's weights
    return layered_model(torchscript(spec));
  std::vector<named_layer> layers;
  if (spec.name == "convnet")
    layers = convnet(spec);
  else if (spec.name == "convnet_wide")
    layers = convnet_wide(spec);
  else if (spec.name == "classifier")
    layers.push_back(linear_layer("fc2", backbone_features, spec.classes));
  else if (spec.name == "head")
    layers = head(spec);
  else if (spec.name == "mlp")
    layers = mlp(spec);
  else
    throw error("unknown model '" + spec.name +
                "', expected convnet, convnet_wide, classifier, head, mlp or torchscript");
  layered_model m(std::move(layers));
  initialise(m, spec.seed);
  return m;
}

int64_t parameter_count(const layered_model& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters())
    n += p.numel();
  return n;
}

std::string weights_digest(const layered_model& m) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                              &EVP_MD_CTX_free);
  TORCH_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
              "weights_digest: cannot initialise SHA-256");
  for (const auto& p : m.named_parameters()) {
    auto bytes = p.second.detach().contiguous();
    TORCH_CHECK(EVP_DigestUpdate(ctx.get(), bytes.data_ptr(), bytes.nbytes()) == 1,
                "weights_digest: SHA-256 update failed");
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  TORCH_CHECK(EVP_DigestFinal_ex(ctx.get(), digest, &length) == 1,
              "weights_digest: SHA-256 final failed");
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

} // namespace baton::model
