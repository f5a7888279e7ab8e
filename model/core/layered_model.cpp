#include "model/core/layered_model.hpp"

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/digest.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist_network.hpp"

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

std::vector<std::pair<std::string, at::Tensor>> layered_model::named_buffers() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& layer : layers_)
    for (const auto& b : layer.module.ptr()->named_buffers(/*recurse=*/true))
      out.emplace_back(layer.name + "." + b.key(), b.value());
  return out;
}

std::vector<at::Tensor> layered_model::buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : layers_)
    for (const auto& b : layer.module.ptr()->buffers(/*recurse=*/true))
      out.push_back(b);
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

/// Fills `t` (float, contiguous) with approximately normal values of mean 0
/// and standard deviation `deviation`, in element order: each is the sum of
/// 12 uniforms in [0, 1), minus 6 (Irwin-Hall), which is exact in double
/// arithmetic and needs no libm call (whose last bits may differ between
/// machines). The uniforms come from a SplitMix64 stream keyed by one draw of
/// `rng`: six 64-bit values per element, where the twister would take seconds
/// for resnet18's 11 M weights.
void fill_normal(at::Tensor& t, double deviation, std::mt19937_64& rng) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "initialisation expects contiguous float parameters");
  constexpr double two_to_minus_32 = 1.0 / 4294967296.0;
  float* data = t.data_ptr<float>();
  uint64_t state = rng();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double sum = 0;
    for (int k = 0; k < 6; ++k, state += 0x9e3779b97f4a7c15ULL) {
      const uint64_t bits = mix64(state);
      sum += static_cast<double>(bits >> 32) * two_to_minus_32;
      sum += static_cast<double>(bits & 0xffffffffULL) * two_to_minus_32;
    }
    data[i] = static_cast<float>((sum - 6.0) * deviation);
  }
}

/// How convolution weights are drawn.
enum class conv_init {
  fan_in_uniform,    ///< PyTorch's default: uniform +-1/sqrt(fan_in), as linear layers
  kaiming_fan_out,   ///< torchvision's ResNet: normal, std sqrt(2 / fan_out)
};

/// Re-initialises every parameter of `m` from `seed` alone, as PyTorch's
/// defaults do in distribution (uniform +-1/sqrt(fan_in) for weights and
/// biases of linear and convolution layers; ones and zeros for normalisation),
/// but from a local generator: modules are built concurrently in several
/// threads, and the global torch generator would make the weights depend on
/// the interleaving. Buffers keep the values their modules start with
/// (running mean 0, running variance 1).
void initialise(layered_model& m, uint64_t seed,
                conv_init convolutions = conv_init::fan_in_uniform) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(mix64(seed));
  for (const auto& layer : m.layers()) {
    for (const auto& module : layer.module.ptr()->modules(/*include_self=*/true)) {
      auto params = module->named_parameters(/*recurse=*/false);
      auto* weight = params.find("weight");
      auto* bias = params.find("bias");
      if (weight && weight->dim() == 4 && convolutions == conv_init::kaiming_fan_out) {
        const double fan_out = static_cast<double>(weight->numel() / weight->size(1));
        fill_normal(*weight, std::sqrt(2.0 / fan_out), rng);
        if (bias)
          bias->zero_();
      } else if (weight && weight->dim() >= 2) {
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
constexpr int64_t backbone_width = 256; ///< convnet features; the default head input

std::vector<named_layer> convnet(const model_spec& spec) {
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat, backbone_width));
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
  layers.push_back(linear_layer("fc1b", spec.wide_features, backbone_width));
  layers.push_back(relu_layer("relu7"));
  return layers;
}

std::vector<named_layer> head(const model_spec& spec) {
  std::vector<named_layer> layers;
  layers.push_back(linear_layer("fc1", spec.features, 128));
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

/// IST's network (model/ist/ist_network.hpp) as layers, with its parameters in
/// ist_network::parameters()' order and values: the same forward, bit for
/// bit (BatchNorm1d without running statistics calls torch::batch_norm with
/// the batch's statistics, as ist_forward does).
layered_model ist_mlp(const model_spec& spec) {
  ist_shape shape;
  shape.inputs = 28 * 28 * spec.in_channels;
  shape.hidden = spec.hidden;
  shape.classes = spec.classes;
  const auto source = make_ist_network(shape, spec.seed); // checks the shape
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
  layers.push_back({"norm", AnyModule(torch::nn::BatchNorm1d(
                                torch::nn::BatchNorm1dOptions(shape.classes)
                                    .affine(false)
                                    .track_running_stats(false)))});
  layered_model m(std::move(layers));
  torch::NoGradGuard no_grad;
  auto params = m.parameters();
  const auto values = source.parameters();
  TORCH_CHECK(params.size() == values.size(), "ist_mlp: parameter count mismatch");
  for (size_t i = 0; i < params.size(); ++i)
    params[i].copy_(values[i]);
  return m;
}

// -- resnet18 ----------------------------------------------------------------------

/// torchvision's ResNet BasicBlock: two 3x3 convolutions with batch norm and a
/// residual connection, through a 1x1 convolution with batch norm
/// ("downsample") when the stride or the channel count changes.
struct BasicBlockOptions {
  BasicBlockOptions(int64_t in_channels, int64_t out_channels)
      : in_channels_(in_channels), out_channels_(out_channels) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, stride) = 1;
};

class BasicBlockImpl : public torch::nn::Module {
public:
  explicit BasicBlockImpl(const BasicBlockOptions& options) {
    using namespace torch::nn;
    const int64_t in = options.in_channels(), out = options.out_channels();
    conv1_ = register_module(
        "conv1", Conv2d(Conv2dOptions(in, out, 3).stride(options.stride()).padding(1).bias(false)));
    bn1_ = register_module("bn1", BatchNorm2d(out));
    conv2_ = register_module("conv2", Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2_ = register_module("bn2", BatchNorm2d(out));
    // Registered under torchvision's names (downsample.0, downsample.1), so
    // parameter keys match a torchvision state dict's.
    if (options.stride() != 1 || in != out)
      downsample_ = register_module(
          "downsample",
          Sequential(Conv2d(Conv2dOptions(in, out, 1).stride(options.stride()).bias(false)),
                     BatchNorm2d(out)));
  }

  torch::Tensor forward(torch::Tensor x) {
    auto identity = downsample_ ? downsample_->forward(x) : x;
    auto y = torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    if (residual_scale_ != 1.0) // ResIST's evaluation (model/ist/resist.hpp); 1: untouched bits
      y = y * residual_scale_;
    return torch::relu(y + identity);
  }

  /// The factor on the residual branch (1: torchvision's block).
  void set_residual_scale(double scale) { residual_scale_ = scale; }

private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
  double residual_scale_ = 1.0;
};
TORCH_MODULE(BasicBlock);

constexpr int64_t resnet18_features = 512;

named_layer basic_block(const char* name, int64_t in, int64_t out, int64_t stride = 1) {
  return {name, AnyModule(BasicBlock(BasicBlockOptions(in, out).stride(stride)))};
}

/// torchvision's resnet18 up to its average pool and flatten (no fc): the
/// 7x7 stride-2 stem (over `in_channels` input channels) and max pool, then
/// four stages of two BasicBlocks. 3x32x32 input -> 64x8x8 after the stem ->
/// 512x1x1 -> 512 features.
std::vector<named_layer> resnet18(int64_t in_channels) {
  using namespace torch::nn;
  std::vector<named_layer> layers;
  layers.push_back({"conv1", AnyModule(Conv2d(
                                 Conv2dOptions(in_channels, 64, 7).stride(2).padding(3).bias(false)))});
  layers.push_back({"bn1", AnyModule(BatchNorm2d(64))});
  layers.push_back(relu_layer("relu"));
  layers.push_back(
      {"maxpool", AnyModule(MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1)))});
  layers.push_back(basic_block("layer1_0", 64, 64));
  layers.push_back(basic_block("layer1_1", 64, 64));
  layers.push_back(basic_block("layer2_0", 64, 128, 2));
  layers.push_back(basic_block("layer2_1", 128, 128));
  layers.push_back(basic_block("layer3_0", 128, 256, 2));
  layers.push_back(basic_block("layer3_1", 256, 256));
  layers.push_back(basic_block("layer4_0", 256, resnet18_features, 2));
  layers.push_back(basic_block("layer4_1", resnet18_features, resnet18_features));
  layers.push_back({"avgpool", AnyModule(AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions(1)))});
  layers.push_back(flatten_layer("flatten"));
  return layers;
}

// -- a TorchScript model's children --------------------------------------------------

std::vector<named_layer> torchscript(const model_spec& spec) {
  if (spec.path.empty() || !std::filesystem::is_regular_file(spec.path))
    throw file_error("model 'torchscript': file '" + spec.path +
                     "' not found (expected a TorchScript archive from torch.jit.save)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(spec.path);
  } catch (const c10::Error& e) {
    throw file_error(spec.path + ": not a readable TorchScript archive (" +
                     e.what_without_backtrace() + ")");
  }
  std::vector<named_layer> layers;
  for (const auto& child : module.named_children())
    layers.push_back({child.name, AnyModule(ScriptLayer(child.value))});
  if (layers.empty())
    throw file_error(spec.path + ": the TorchScript model has no child modules, expected its "
                                 "layers as top-level children");
  return layers;
}

} // namespace

layered_model make_model(const model_spec& spec) {
  if ((spec.name == "classifier" || spec.name == "head" || spec.name == "mlp" ||
       spec.name == "ist_mlp") &&
      spec.classes <= 0)
    throw error("model '" + spec.name + "': expected classes > 0, got " +
                std::to_string(spec.classes));
  if ((spec.name == "classifier" || spec.name == "head") && spec.features <= 0)
    throw error("model '" + spec.name + "': expected features > 0, got " +
                std::to_string(spec.features));
  if (spec.name == "torchscript") // pretrained: keep the file's weights
    return layered_model(torchscript(spec));
  if (spec.name == "ist_mlp") // IST's own initialisation
    return ist_mlp(spec);
  std::vector<named_layer> layers;
  if (spec.name == "convnet")
    layers = convnet(spec);
  else if (spec.name == "convnet_wide")
    layers = convnet_wide(spec);
  else if (spec.name == "resnet18")
    layers = resnet18(spec.in_channels);
  else if (spec.name == "classifier")
    layers.push_back(linear_layer("fc2", spec.features, spec.classes));
  else if (spec.name == "head")
    layers = head(spec);
  else if (spec.name == "mlp")
    layers = mlp(spec);
  else
    throw error("unknown model '" + spec.name + "', expected convnet, convnet_wide, resnet18, "
                "classifier, head, mlp, ist_mlp or torchscript");
  layered_model m(std::move(layers));
  initialise(m, spec.seed,
             spec.name == "resnet18" ? conv_init::kaiming_fan_out : conv_init::fan_in_uniform);
  return m;
}

int64_t backbone_features(const model_spec& spec) {
  if (spec.name == "convnet" || spec.name == "convnet_wide" || spec.name == "torchscript")
    return backbone_width;
  if (spec.name == "resnet18")
    return resnet18_features;
  throw error("model '" + spec.name +
              "' is not a backbone (expected convnet, convnet_wide, resnet18 or torchscript)");
}

bool set_residual_scale(const named_layer& layer, double scale) {
  auto block = std::dynamic_pointer_cast<BasicBlockImpl>(layer.module.ptr());
  if (!block)
    return false;
  block->set_residual_scale(scale);
  return true;
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
