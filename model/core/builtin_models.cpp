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

/// Max pooling through ATen's channels-last kernel, which runs over the
/// channels in vector lanes: the convnet's pool1 at 32 samples on one thread
/// 3.4 ms forward in NCHW, 0.4 ms channels-last, 0.9 ms with the two layout
/// copies and the indices. The output and indices come back in NCHW
/// and the backward is the plain layer's (max_pool2d_with_indices_backward
/// over the NCHW input), so gradients are the plain layer's bit for bit:
/// both kernels scan a window row by row and keep its first largest value
/// (a NaN, its last), giving the same index.
struct channels_last_max_pool : torch::autograd::Function<channels_last_max_pool> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const torch::nn::MaxPool2dOptions& o) {
    auto [output, indices] =
      at::max_pool2d_with_indices(input.contiguous(at::MemoryFormat::ChannelsLast),
                                  o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                  o.ceil_mode());
    indices = indices.contiguous();
    ctx->save_for_backward({input, indices});
    const auto list = [](const auto& a) { return std::vector<int64_t>(a->begin(), a->end()); };
    auto& d = ctx->saved_data;
    d["kernel"] = list(o.kernel_size());
    d["stride"] = list(o.stride());
    d["padding"] = list(o.padding());
    d["dilation"] = list(o.dilation());
    d["ceil_mode"] = o.ceil_mode();
    return output.contiguous();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& d = ctx->saved_data;
    return {at::max_pool2d_with_indices_backward(
              grads[0], saved[0], d.at("kernel").toIntVector(), d.at("stride").toIntVector(),
              d.at("padding").toIntVector(), d.at("dilation").toIntVector(),
              d.at("ceil_mode").toBool(), saved[1]),
            torch::autograd::Variable()};
  }
};

/// torch::nn::MaxPool2d (its options, its name, exported as it) whose
/// batched forward is channels_last_max_pool.
class ChannelsLastMaxPool2dImpl : public torch::nn::MaxPool2dImpl {
public:
  using MaxPool2dImpl::MaxPool2dImpl;

  torch::Tensor forward(const torch::Tensor& input) {
    if (input.dim() != 4)
      return MaxPool2dImpl::forward(input);
    return channels_last_max_pool::apply(input, options);
  }
};
TORCH_MODULE(ChannelsLastMaxPool2d);

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
    return {name, AnyModule(ChannelsLastMaxPool2d(
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
