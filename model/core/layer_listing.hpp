#pragma once

// A model's layers as names and ties, without LibTorch in the caller: what
// the topology reader needs of a backbone (the names a strategy's keys refer
// to, the ties a cut must not separate). Built in model/core, where the
// model is.

#include <string>
#include <vector>

#include "model/core/layer_tie.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// The layers of the model `spec` builds (make_model): their names in
/// order and the parameters two of them hold (tied weights).
struct layer_listing {
  std::vector<std::string> names;
  std::vector<layer_tie> ties;
};

/// Builds `spec`'s model to list its layers (a convnet_wide narrow: its
/// names do not depend on the width). Throws model::error on a model that
/// cannot be built, LibTorch's errors included (without their backtrace).
layer_listing list_layers(model_spec spec);

} // namespace baton::model
