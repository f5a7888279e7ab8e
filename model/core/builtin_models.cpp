#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/model_parts.hpp"

namespace baton::model {

using torch::nn::AnyModule;

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

named_layer build_layer(const layer_declaration& layer) {
  using namespace torch::nn;
  using kind = layer_declaration::kind;
  const char* name = layer.name.c_str();
  switch (layer.what) {
  case kind::convolution:
    return {name, AnyModule(Conv2d(Conv2dOptions(layer.in, layer.out, layer.kernel)
                                       .stride(layer.stride)
                                       .padding(layer.padding)
                                       .bias(layer.bias)))};
  case kind::linear:
    return linear_layer(name, layer.in, layer.out, layer.bias);
  case kind::batch_norm:
    return {name, AnyModule(BatchNorm2d(layer.out))};
  case kind::feature_norm:
    return batch_norm_layer(name, layer.out);
  case kind::relu:
    return relu_layer(name);
  case kind::max_pool:
    return {name, AnyModule(MaxPool2d(
                      MaxPool2dOptions(layer.kernel).stride(layer.stride).padding(layer.padding)))};
  case kind::average_pool:
    return {name, AnyModule(AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions(1)))};
  case kind::flatten:
    return flatten_layer(name);
  case kind::basic_block:
    return {name, AnyModule(BasicBlock(
                      BasicBlockOptions(layer.in, layer.out).stride(layer.stride)))};
  }
  throw error("layer '" + layer.name + "' of an unknown kind");
}

} // namespace

std::vector<named_layer> build_layers(const model_declaration& declaration) {
  std::vector<named_layer> layers;
  layers.reserve(declaration.layers.size());
  for (const auto& layer : declaration.layers)
    layers.push_back(build_layer(layer));
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
