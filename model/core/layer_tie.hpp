#pragma once

// Tied weights as plain data: two layers of a model that hold one parameter.
// Torch-free, so that what only carries or checks ties (the topology, the
// pipeline's cut) does not reach LibTorch's frontend; layered_model.hpp finds
// them in a model (layer_ties).

#include <cstddef>
#include <string>
#include <vector>

namespace baton::model {

/// Two layers that hold one parameter (tied weights).
struct layer_tie {
  size_t first = 0;        ///< index of the first layer holding it
  size_t other = 0;        ///< index of a later layer holding it too
  std::string first_layer; ///< their names
  std::string other_layer;
  std::string parameter;   ///< its name, "first_layer.param"
  std::string other_name;  ///< its name in the other layer, "other_layer.param"
  /// "layers 'b' and 'd', which share one parameter (tied weights:
  /// 'b.weight' is 'd.weight')".
  std::string reason() const;
};

/// The first of `ties` that a cut of the layers into contiguous parts
/// separates, or nullptr. `cuts`: the first layer index of every part but
/// the first, ascending (a pipeline's stage boundaries).
const layer_tie* separated_tie(const std::vector<layer_tie>& ties,
                               const std::vector<size_t>& cuts);

} // namespace baton::model
