#pragma once

// A model's layers as names and ties, and a backbone's output width, without
// LibTorch in the caller: what the topology reader and the strategies'
// sections need of a model (the names a strategy's keys refer to, the ties a
// cut must not separate, the width the heads take). A built-in model's are
// read from its declaration (architecture.hpp), a TorchScript file's by
// loading it: a section that includes this header compiles without
// LibTorch's headers (a quarter of the time), and builds no model.

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/layer_tie.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// The layers of the model `spec` builds (make_model): their names in
/// order, the parameters two of them hold (tied weights), and the layers
/// whose output for a sample depends on the rest of its batch
/// (batch_dependent_layers, freezing.hpp: batch norm without running
/// statistics), in order.
struct layer_listing {
  std::vector<std::string> names;
  std::vector<layer_tie> ties;
  std::vector<std::string> batch_dependent;
  /// A backbone's output width (backbone_features), found with its layers
  /// when asked (with_features::yes; a TorchScript backbone's measured on
  /// the model listed, not loaded again); 0 when not asked, and for a model
  /// that is not a backbone or whose output is not [N, features], with the
  /// reason in features_error.
  int64_t features = 0;
  std::string features_error;
};

/// Whether list_layers also finds a backbone's output width (what a head
/// takes): a TorchScript backbone's costs a forward pass of one probe.
enum class with_features : bool { no, yes };

/// The layers of `spec`'s model: a built-in one's from its declaration
/// (architecture.hpp, nothing built), a TorchScript file's by loading it
/// (and, for its features when asked, one probe shaped as the data's
/// samples). Throws model::error on a model that cannot be built,
/// LibTorch's errors included (without their backtrace).
layer_listing list_layers(const model_spec& spec, with_features features = with_features::no);

/// The layers of the model `baton pretrain` and a pipeline train on a task
/// of `classes` classes (make_pretrain_model): the backbone's and its
/// classifier "fc2", or a TorchScript backbone's alone when it ends in the
/// task's logits. Throws as make_pretrain_model does.
layer_listing list_pretrain_layers(const model_spec& backbone, int64_t classes);

/// The width of the features a backbone built from `spec` outputs: 256 for
/// convnet and convnet_wide, 512 for resnet18 (their declarations'), what a
/// TorchScript backbone outputs measured as output_features
/// (layered_model.hpp) does;
/// what the classifier and the heads take. Throws model::error for a model
/// that is not a backbone (convnet, convnet_wide, resnet18, torchscript), or
/// as output_features does.
int64_t backbone_features(const model_spec& spec);

} // namespace baton::model
