#include "model/core/layer_tie.hpp"

#include <algorithm>

namespace baton::model {

std::string layer_tie::reason() const {
  return "layers '" + first_layer + "' and '" + other_layer +
         "', which share one parameter (tied weights: '" + parameter + "' is '" + other_name +
         "')";
}

const layer_tie* separated_tie(const std::vector<layer_tie>& ties,
                               const std::vector<size_t>& cuts) {
  const auto part_of = [&](size_t layer) {
    return std::upper_bound(cuts.begin(), cuts.end(), layer) - cuts.begin();
  };
  for (const auto& tie : ties)
    if (part_of(tie.first) != part_of(tie.other))
      return &tie;
  return nullptr;
}

} // namespace baton::model
