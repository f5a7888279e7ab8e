#include "actors/flow/tensor_parts.hpp"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

namespace baton::actors {
inline namespace flow {

namespace {

// A part's first tensor is its header, int64 [1 + N, 3] for its N other
// tensors: row 0 (tensors of the whole set, this part's index, parts), then
// per tensor (its index in the whole set, its first row, the whole tensor's
// rows), both -1 for a tensor sent whole.

constexpr const char* part_suffix = "/part";
constexpr int64_t most_tensors = int64_t{1} << 20;

struct entry {
  int64_t index, first, rows;
  at::Tensor tensor;
};

uint64_t bytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<uint64_t>(t.numel()) * t.element_size() : 0;
}

/// `t` (the set's tensor `index`) whole, or in blocks of rows of at most
/// `max_bytes`.
void add_entries(int64_t index, const at::Tensor& t, uint64_t max_bytes, std::vector<entry>& out) {
  const uint64_t bytes = bytes_of(t);
  if (bytes <= max_bytes || t.dim() == 0 || t.size(0) <= 1) {
    out.push_back({index, -1, -1, t});
    return;
  }
  const int64_t rows = t.size(0);
  const uint64_t row_bytes = bytes / static_cast<uint64_t>(rows);
  const int64_t per_block = std::max<int64_t>(1, static_cast<int64_t>(max_bytes / row_bytes));
  for (int64_t first = 0; first < rows; first += per_block)
    out.push_back({index, first, rows, t.narrow(0, first, std::min(per_block, rows - first))});
}

messages::tensor_set part_of(const messages::tensor_set& w, std::vector<entry> entries) {
  messages::tensor_set part{w.kind + part_suffix, w.from, w.replica, w.step, w.step_size, {}, {}};
  auto header = at::empty({static_cast<int64_t>(entries.size()) + 1, 3}, at::kLong);
  auto h = header.accessor<int64_t, 2>();
  for (size_t i = 0; i < entries.size(); ++i) {
    h[static_cast<int64_t>(i) + 1][0] = entries[i].index;
    h[static_cast<int64_t>(i) + 1][1] = entries[i].first;
    h[static_cast<int64_t>(i) + 1][2] = entries[i].rows;
  }
  part.tensors.push_back(header);
  for (auto& e : entries)
    part.tensors.push_back(std::move(e.tensor));
  return part;
}

} // namespace

std::vector<messages::tensor_set> in_parts(messages::tensor_set w, uint64_t max_bytes) {
  uint64_t total = 0;
  for (const auto& t : w.tensors)
    total += bytes_of(t);
  if (total <= max_bytes)
    return {std::move(w)};
  std::vector<entry> entries;
  for (size_t i = 0; i < w.tensors.size(); ++i)
    add_entries(static_cast<int64_t>(i), w.tensors[i], max_bytes, entries);
  std::vector<messages::tensor_set> parts;
  std::vector<entry> current;
  uint64_t current_bytes = 0;
  for (auto& e : entries) {
    const uint64_t bytes = bytes_of(e.tensor);
    if (!current.empty() && current_bytes + bytes > max_bytes) {
      parts.push_back(part_of(w, std::move(current)));
      current.clear();
      current_bytes = 0;
    }
    current_bytes += bytes;
    current.push_back(std::move(e));
  }
  if (!current.empty())
    parts.push_back(part_of(w, std::move(current)));
  const auto count = static_cast<int64_t>(parts.size());
  for (int64_t i = 0; i < count; ++i) {
    auto h = parts[static_cast<size_t>(i)].tensors.front().accessor<int64_t, 2>();
    h[0][0] = static_cast<int64_t>(w.tensors.size());
    h[0][1] = i;
    h[0][2] = count;
  }
  return parts;
}

bool is_part(const messages::tensor_set& w) {
  const std::string suffix = part_suffix;
  return w.kind.size() > suffix.size() &&
         w.kind.compare(w.kind.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::optional<messages::tensor_set> tensor_set_assembler::add(messages::tensor_set part,
                                                              std::string& error) {
  const std::string kind = part.kind.substr(0, part.kind.size() - std::string{part_suffix}.size());
  const auto key = std::make_tuple(part.from, kind, part.replica, part.step);
  auto refuse = [&](const std::string& why) -> std::optional<messages::tensor_set> {
    error = "a part of the tensor set '" + kind + "' from '" + part.from + "' of step " +
            std::to_string(part.step) + ": " + why + " (what arrived of the set is dropped)";
    pending_.erase(key);
    return std::nullopt;
  };
  if (part.tensors.empty())
    return refuse("no header");
  const auto& header = part.tensors.front();
  if (!header.defined() || header.scalar_type() != at::kLong || header.dim() != 2 ||
      header.size(1) != 3 || header.size(0) != static_cast<int64_t>(part.tensors.size()))
    return refuse("its header is not int64 [1 + tensors, 3]");
  auto h = header.contiguous();
  auto head = h.accessor<int64_t, 2>();
  const int64_t tensors = head[0][0], index = head[0][1], parts = head[0][2];
  if (tensors < 1 || tensors > most_tensors || parts < 1 || index < 0 || index >= parts)
    return refuse("its header says part " + std::to_string(index) + " of " +
                  std::to_string(parts) + " of " + std::to_string(tensors) + " tensors");
  auto& p = pending_[key];
  if (p.parts == 0) {
    p.parts = parts;
    p.tensors = tensors;
  } else if (p.parts != parts || p.tensors != tensors) {
    return refuse("its header disagrees with the set's earlier parts");
  }
  if (!p.arrived_parts.insert(index).second)
    return refuse("part " + std::to_string(index) + " arrived twice");
  for (int64_t i = 1; i < h.size(0); ++i) {
    const int64_t original = head[i][0], first = head[i][1], rows = head[i][2];
    const auto& t = part.tensors[static_cast<size_t>(i)];
    if (original < 0 || original >= tensors)
      return refuse("tensor " + std::to_string(original) + " is not one of the set's");
    auto known = p.rows.find(original);
    if (known != p.rows.end() && known->second != rows)
      return refuse("tensor " + std::to_string(original) + " comes with two row counts");
    if (first == -1 ? rows != -1 || known != p.rows.end()
                    : rows < 1 || first < 0 || !t.defined() || t.dim() < 1 ||
                        first + t.size(0) > rows || p.blocks[original].count(first) != 0)
      return refuse("tensor " + std::to_string(original) + "'s rows do not fit");
    p.rows[original] = rows;
    p.blocks[original][first] = t;
  }
  if (static_cast<int64_t>(p.arrived_parts.size()) < p.parts)
    return std::nullopt;
  messages::tensor_set whole{kind, part.from, part.replica, part.step, part.step_size, {}, {}};
  for (int64_t original = 0; original < p.tensors; ++original) {
    auto blocks = p.blocks.find(original);
    if (blocks == p.blocks.end())
      return refuse("tensor " + std::to_string(original) + " is in none of its parts");
    if (p.rows[original] == -1) {
      whole.tensors.push_back(blocks->second.begin()->second);
      continue;
    }
    std::vector<at::Tensor> in_order;
    int64_t next = 0;
    for (const auto& [first, block] : blocks->second) { // by first row
      if (first != next || (!in_order.empty() &&
                            block.sizes().slice(1) != in_order.front().sizes().slice(1)))
        return refuse("tensor " + std::to_string(original) + "'s blocks leave a gap or differ");
      next += block.size(0);
      in_order.push_back(block);
    }
    if (next != p.rows[original])
      return refuse("tensor " + std::to_string(original) + " misses rows");
    whole.tensors.push_back(at::cat(in_order, 0));
  }
  pending_.erase(key);
  return whole;
}

std::optional<messages::tensor_set> tensor_set_assembler::take(messages::tensor_set w) {
  if (w.invalid || !is_part(w))
    return w;
  std::string error;
  auto whole = add(std::move(w), error);
  if (!error.empty())
    spdlog::warn("refused {}", error);
  return whole;
}

} // namespace flow
} // namespace baton::actors
