#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "model/core/layer_listing.hpp"
#include "model/core/layer_tie.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// One named layer of a layered model.
struct named_layer {
  std::string name;
  torch::nn::AnyModule module; ///< Tensor -> Tensor
};

/// One parameter of a layered model. A parameter is its storage: a tensor
/// that several layers hold (tied weights, as `self.b.weight =
/// self.d.weight` in PyTorch) is one parameter, named and placed by the
/// first layer, in layer order, that holds it.
struct model_parameter {
  std::string name; ///< "layer.param" in that first layer
  at::Tensor tensor;
  size_t layer = 0; ///< index of that first layer
  /// Its names in the later layers that hold it too, "layer.param", in
  /// layer order, and those layers' indices; empty when it is not tied.
  std::vector<std::string> tied_names;
  std::vector<size_t> tied_layers;
};

/// A model as a sequence of named layers that can be sliced into contiguous
/// stages. Copies share the layers (as torch modules do).
class layered_model {
public:
  layered_model() = default;
  explicit layered_model(std::vector<named_layer> layers);

  /// Runs every layer in order.
  at::Tensor forward(at::Tensor x) const;

  /// The layers [begin, end) as a model sharing their parameters.
  /// Precondition: begin <= end <= size().
  layered_model slice(size_t begin, size_t end) const;

  /// Index of the layer called `name`, or -1.
  int64_t index_of(const std::string& name) const;

  size_t size() const { return layers_.size(); }
  const std::vector<named_layer>& layers() const { return layers_; }
  std::vector<std::string> layer_names() const;

  /// Every parameter once, in layer order (a layer's own in its module's
  /// order), with the layers that share it: what every other enumeration
  /// of the parameters (named_parameters, parameters, named_state, the
  /// data-parallel layout, freezing, checkpoints) is built from. Two
  /// layers' parameters are one when they share their storage; sharing it
  /// as different views (offsets, shapes, strides) is a programmer error
  /// here: make_model refuses such a file at load.
  std::vector<model_parameter> parameter_table() const;

  /// Parameters as "layer.param" -> tensor, in layer order; a tied tensor
  /// once, under its first layer's name (parameter_table()).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<at::Tensor> parameters() const;

  /// Buffers as "layer.buffer" -> tensor, in layer order: the state that is
  /// not trained by gradients (batch norm's running_mean, running_var and
  /// num_batches_tracked). Empty for models without batch norm statistics.
  /// A buffer shared by two layers is listed once, as a tied parameter is.
  std::vector<std::pair<std::string, at::Tensor>> named_buffers() const;
  std::vector<at::Tensor> buffers() const;

  /// The whole state: named_parameters() then named_buffers(). What a
  /// checkpoint holds and what a stage sends as its weights.
  std::vector<std::pair<std::string, at::Tensor>> named_state() const;
  std::vector<at::Tensor> state() const;

  /// Sets requires_grad on every parameter; true leaves out those a
  /// TorchScript file keeps out of training (parameters_frozen_by_file).
  void set_trainable(bool trainable);
  /// Switches every layer between training and evaluation behaviour.
  void train(bool on);

private:
  std::vector<named_layer> layers_;
};

/// Builds a model; parameters are initialised from `spec.seed` only, so the
/// same spec gives the same weights on every machine and in every process.
/// Throws model::error on an unknown name or unreadable TorchScript file.
layered_model make_model(const model_spec& spec);

/// The width of the features `backbone` (built from `spec`) outputs,
/// measured: it runs once, in evaluation mode and without gradients, on
/// two samples of the data's shape (spec.in_channels, in_height, in_width);
/// each layer's mode is restored. What a classifier or head on it takes.
/// Throws model::error when it fails on that input or its output is not
/// [N, features].
int64_t output_features(const layered_model& backbone, const model_spec& spec);

/// Sets the factor on the residual branch of `layer` when it is a resnet18
/// BasicBlock (relu(scale x branch + shortcut); 1, the default, is
/// torchvision's block bit for bit): ResIST's evaluation of a partitioned
/// block (model/ist/resist.hpp). Returns false, changing nothing, for any other
/// layer.
bool set_residual_scale(const named_layer& layer, double scale);

/// Every pair of layers of `m` that share a parameter, in parameter order
/// (a parameter held by three layers gives two: the first with each other).
std::vector<layer_tie> layer_ties(const layered_model& m);

/// `m`'s layers as a listing: names, ties and the layers that normalise over
/// the batch (batch_dependent_layers).
layer_listing listing_of(const layered_model& m);

/// Number of scalar parameters (a tied parameter counted once).
int64_t parameter_count(const layered_model& m);

/// SHA-256 (hex) of the parameters' raw bytes in named_parameters() order.
/// Buffers (batch norm's running statistics) are not part of it.
std::string weights_digest(const layered_model& m);

} // namespace baton::model
