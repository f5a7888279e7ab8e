#include "actors/modes/ist/resist_pieces.hpp"

#include <algorithm>

#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

resist_layout make_resist_layout(const model::layered_model& m, int32_t shards) {
  if (shards < 1)
    throw model::error("resist: expected at least one shard");
  resist_layout out;
  out.layers = m.size();
  out.partitioned = model::resist_partitioned_layers(m);
  out.state_layers = model::resist_state_layers(m);
  const auto state = m.state();
  int64_t total = 0;
  for (const auto& t : state)
    total += static_cast<int64_t>(t.nbytes());
  out.bounds.assign(static_cast<size_t>(shards) + 1, state.size());
  out.bounds[0] = 0;
  int64_t offset = 0;
  int32_t shard = 0; // the shard of the tensor at `offset`
  for (size_t k = 0; k < state.size(); ++k) {
    const auto owner = static_cast<int32_t>(offset * shards / std::max<int64_t>(total, 1));
    while (shard < owner) // shards skipped by a large tensor own nothing
      out.bounds[static_cast<size_t>(++shard)] = k;
    offset += static_cast<int64_t>(state[k].nbytes());
  }
  return out;
}

std::vector<size_t> resist_message_tensors(const resist_layout& layout,
                                           const model::resist_deal& deal, int32_t worker,
                                           int32_t shard, bool whole) {
  const auto active =
    model::resist_active_layers(layout.layers, layout.partitioned, deal, worker);
  std::vector<size_t> out;
  const auto s = static_cast<size_t>(shard);
  for (size_t k = layout.bounds.at(s); k < layout.bounds.at(s + 1); ++k)
    if (whole || active[layout.state_layers[k]])
      out.push_back(k);
  return out;
}

void check_resist_tensors(const std::vector<at::Tensor>& values,
                          const std::vector<at::Tensor>& state,
                          const std::vector<size_t>& indices, const std::string& what) {
  if (values.size() != indices.size())
    throw model::error(what + ": " + std::to_string(values.size()) + " tensors, expected " +
                       std::to_string(indices.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& like = state.at(indices[i]);
    if (!values[i].defined() || values[i].sizes() != like.sizes() ||
        values[i].scalar_type() != like.scalar_type())
      throw model::error(what + ": tensor " + std::to_string(i) + " (state tensor " +
                         std::to_string(indices[i]) + ") does not have the network's shape " +
                         "and type");
  }
}

int64_t resist_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors)
    n += static_cast<int64_t>(t.nbytes());
  return n;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
