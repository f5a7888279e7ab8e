#include "model/core/specs.hpp"

#include <algorithm>

#include "model/core/error.hpp"

namespace baton::model {

task make_task(std::string name, std::vector<int64_t> label_map) {
  if (label_map.empty())
    throw error("task '" + name + "': expected a non-empty label map");
  // At most as many task classes as dataset classes (the map's length): a
  // map from a file or the network must not size a head of 1e8 outputs.
  const auto most = static_cast<int64_t>(label_map.size()) - 1;
  for (size_t i = 0; i < label_map.size(); ++i)
    if (label_map[i] < 0 || label_map[i] > most)
      throw error("task '" + name + "': label_map[" + std::to_string(i) + "] is " +
                  std::to_string(label_map[i]) + ", expected a class id from 0 to " +
                  std::to_string(most) + " (at most one task class per dataset class)");
  task t;
  t.classes = 1 + *std::max_element(label_map.begin(), label_map.end());
  t.name = std::move(name);
  t.label_map = std::move(label_map);
  return t;
}

} // namespace baton::model
