#pragma once

// Trained weights out (`--save-model`): a layered model as a TorchScript
// module that plain PyTorch runs, `torch.jit.load(path)(x)`, with the outputs
// baton's evaluation computes. Every layer is a submodule under its name
// holding copies of its parameters and buffers (so the module's state_dict
// keys are named_state()'s: "conv1.weight", "layer1_0.downsample.0.weight"),
// and `forward` is TorchScript generated from the layers' kinds and options:
//
//   Conv2d (zero padding)  torch.conv2d           Linear      torch.linear
//   ReLU                   torch.relu             Flatten     torch.flatten
//   MaxPool2d              torch.max_pool2d       Dropout     the identity
//   AdaptiveAvgPool2d      torch.adaptive_avg_pool2d
//   BatchNorm1d/2d         torch.batch_norm: running statistics when the layer
//                          tracks them (evaluation), else the batch's (IST's)
//   Sequential             its children in order
//   resnet18's BasicBlock  torchvision's block, times a residual scale
//   a TorchScript layer    the file's child module itself, with the trained
//                          parameters (export_options::script_path)
//
// The forward is evaluation: module.train() does not change it.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/script.h>

#include "model/core/dataset.hpp"
#include "model/core/layered_model.hpp"

namespace baton::model {

/// What an export needs besides the layers.
struct export_options {
  /// The TorchScript file a `torchscript` model's layers were loaded from
  /// (model_spec::path): each such layer is exported as that file's child of
  /// the same name with the layer's parameters. "" when the model has none.
  std::string script_path;
  /// The factor on the residual branch of resnet18 BasicBlock layers, by
  /// layer name (ResIST's evaluation: model::ist::resist_eval_scale); 1 when absent.
  std::map<std::string, double> residual_scales;
  /// The data's normalisation, carried into the module: its `forward` then
  /// takes uint8 samples as the data files hold them as well as normalised
  /// float32 ones, and `forward_raw` any raw samples (a float32 npy's
  /// values). Absent: `forward` takes normalised inputs only.
  std::optional<input_normalisation> input;
};

/// One named model of an export of several (transfer: a head per task).
struct named_model {
  std::string name;
  layered_model model;
};

/// `m` as a TorchScript module: one submodule per layer, and
/// `forward(x: Tensor) -> Tensor` computing m.forward in evaluation mode.
/// Throws model::error naming the layer when one is of a kind it cannot
/// write, file_error when `options.script_path` cannot be read.
torch::jit::Module script_module(const layered_model& m, const export_options& options = {});

/// The transfer job's model: `backbone` and every head on its features.
/// Submodules `backbone` (script_module of it) and `heads` (one submodule
/// per head, by name); `forward(x: Tensor) -> Dict[str, Tensor]` maps every
/// head's name to its logits on x.
torch::jit::Module script_module(const layered_model& backbone,
                                 const export_options& backbone_options,
                                 const std::vector<named_model>& heads);

/// script_module(m, options) written to `path` (model::save_module): the
/// model runnable in PyTorch, and a checkpoint load_checkpoint reads.
void export_model(const layered_model& m, const std::string& path,
                  const export_options& options = {});

} // namespace baton::model
