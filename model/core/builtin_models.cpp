#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"

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

/// The convnet's flattened width: 128 channels after three 2x2 pools
/// (floor), 128x3x3 = 1152 for 28x28 input, 128x4x4 for 32x32.
int64_t convnet_flat(const model_spec& spec) {
  if (spec.in_height < 8 || spec.in_width < 8)
    throw error("model '" + spec.name + "' takes images of at least 8x8 (three 2x2 pools), got " +
                std::to_string(spec.in_height) + "x" + std::to_string(spec.in_width));
  return 128 * (spec.in_height / 8) * (spec.in_width / 8);
}

} // namespace

std::vector<named_layer> convnet(const model_spec& spec) {
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat(spec), convnet_features));
  layers.push_back(relu_layer("relu6"));
  return layers;
}

std::vector<named_layer> convnet_wide(const model_spec& spec) {
  if (spec.wide_features <= 0)
    throw error("model 'convnet_wide': expected wide_features > 0, got " +
                std::to_string(spec.wide_features));
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear_layer("fc1", convnet_flat(spec), spec.wide_features));
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

/// C*H*W -> 4096 -> 4096 -> classes, batch norm without running statistics (so that
/// training and evaluation compute the same function) and no biases.
std::vector<named_layer> mlp(const model_spec& spec) {
  constexpr int64_t hidden = 4096;
  std::vector<named_layer> layers;
  layers.push_back(flatten_layer("flatten"));
  layers.push_back(
      linear_layer("fc1", spec.in_channels * spec.in_height * spec.in_width, hidden, false));
  layers.push_back(batch_norm_layer("bn1", hidden));
  layers.push_back(relu_layer("relu1"));
  layers.push_back(linear_layer("fc2", hidden, hidden, false));
  layers.push_back(batch_norm_layer("bn2", hidden));
  layers.push_back(relu_layer("relu2"));
  layers.push_back(linear_layer("fc3", hidden, spec.classes, false));
  return layers;
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
