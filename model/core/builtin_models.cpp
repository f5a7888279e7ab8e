#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"
#include "model/ist/ist_network.hpp"

namespace baton::model {

using torch::nn::AnyModule;

namespace {

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

} // namespace

std::vector<named_layer> convnet(const model_spec& spec) {
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat, convnet_features));
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
  layers.push_back(linear_layer("fc1b", spec.wide_features, convnet_features));
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

namespace {

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

named_layer basic_block(const char* name, int64_t in, int64_t out, int64_t stride = 1) {
  return {name, AnyModule(BasicBlock(BasicBlockOptions(in, out).stride(stride)))};
}

} // namespace

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

bool set_residual_scale(const named_layer& layer, double scale) {
  auto block = std::dynamic_pointer_cast<BasicBlockImpl>(layer.module.ptr());
  if (!block)
    return false;
  block->set_residual_scale(scale);
  return true;
}

} // namespace baton::model
