#pragma once

// The built-in models declared as plain data, free of LibTorch: each layer's
// name, kind and sizes. make_model builds a built-in model from its
// declaration (builtin_models.cpp), and what a config needs of a model (its
// layer names, a backbone's output width) is read from the declaration
// without building one. A TorchScript model is not declared: its layers are
// the user's file's, known only by loading it.

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/layer_listing.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// One layer of a built-in model.
struct layer_declaration {
  enum class kind {
    convolution,  ///< Conv2d(in, out, kernel), stride, padding, bias
    linear,       ///< Linear(in, out), bias
    batch_norm,   ///< BatchNorm2d(out) with running statistics
    feature_norm, ///< BatchNorm1d(out) without running statistics (train = eval)
    relu,
    max_pool,     ///< MaxPool2d(kernel), stride, padding
    average_pool, ///< AdaptiveAvgPool2d(1)
    flatten,
    basic_block,  ///< torchvision's ResNet BasicBlock(in, out), stride
  };

  std::string name;
  kind what = kind::relu;
  int64_t in = 0;  ///< input channels or features
  int64_t out = 0; ///< output channels or features
  int64_t kernel = 0;
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
};

/// How a declared model's parameters are drawn (initialise, model_parts.hpp).
enum class weight_init {
  fan_in_uniform,  ///< PyTorch's default: uniform +-1/sqrt(fan_in), convolutions and linear
  kaiming_fan_out, ///< torchvision's ResNet: convolutions normal, std sqrt(2 / fan_out)
  /// He's for layers each followed by a ReLU: convolutions and linear layers normal, std
  /// sqrt(2 / fan_in), biases 0. A ReLU stack drawn by PyTorch's default keeps a sixth of
  /// its input's second moment per layer: the convnet's 6 layers started at a loss of 2.30
  /// and stayed there for ~150 SGD steps at lr 0.0125.
  kaiming_fan_in,
};

/// A built-in model: its layers in order and how its weights are drawn.
struct model_declaration {
  std::vector<layer_declaration> layers;
  weight_init weights = weight_init::fan_in_uniform;
};

/// Whether `model_name` is declared (every model make_model builds but a
/// TorchScript file: convnet, convnet_wide, resnet18, classifier, head, mlp).
bool is_declared(const std::string& model_name);

/// The declaration of the built-in model `spec` names. Throws model::error
/// for a name that is not declared and for sizes it cannot be built with
/// (an image under 8x8 for the convnets, classes or features not positive).
model_declaration declare_model(const model_spec& spec);

/// What a backbone may be (backbone.model): the declared backbones and a
/// TorchScript file ("torchscript"), in the order the docs list them.
const std::vector<std::string>& backbone_models();

/// A declaration's layers as a listing: their names, no ties (a declared
/// model ties no weights), and the layers whose output for a sample depends
/// on the rest of its batch (feature_norm: batch norm without running
/// statistics), in order.
layer_listing listing_of(const model_declaration& declaration);

/// The classifier ("fc2", Linear(features -> classes)) that make_pretrain_model
/// puts on a backbone of `features` outputs for a task of `classes` classes.
model_spec pretrain_classifier(int64_t features, int64_t classes);

/// The width of a declared backbone's output: its last layer's that changes
/// the width (256 for convnet and convnet_wide, 512 for resnet18).
int64_t declared_features(const model_declaration& declaration);

} // namespace baton::model
