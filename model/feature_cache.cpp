#include "model/feature_cache.hpp"

#include <algorithm>

#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::model {

cache_stats& cache_stats::operator+=(const cache_stats& o) {
  hits += o.hits;
  misses += o.misses;
  rejected += o.rejected;
  entries += o.entries;
  bytes += o.bytes;
  invalidations += o.invalidations;
  return *this;
}

feature_cache::feature_cache(double budget_mb)
    : budget_bytes_(static_cast<int64_t>(budget_mb * 1024.0 * 1024.0)) {
  if (!(budget_mb >= 0))
    throw error("feature cache: expected cache_mb >= 0, got " + std::to_string(budget_mb));
}

void feature_cache::set_freeze_point(size_t point) {
  if (point == freeze_point_)
    return;
  if (!rows_.empty())
    ++stats_.invalidations;
  clear();
  freeze_point_ = point;
}

at::Tensor feature_cache::find(int64_t sample) {
  auto it = rows_.find(sample);
  if (it == rows_.end()) {
    ++stats_.misses;
    return {};
  }
  ++stats_.hits;
  return it->second;
}

bool feature_cache::insert(int64_t sample, const at::Tensor& row) {
  if (rows_.count(sample) != 0)
    return true;
  const auto bytes = static_cast<int64_t>(row.numel() * row.element_size());
  if (stats_.bytes + bytes > budget_bytes_) {
    ++stats_.rejected;
    return false;
  }
  // A contiguous copy of its own: a view would keep the whole batch alive.
  rows_.emplace(sample, row.detach().clone(at::MemoryFormat::Contiguous));
  stats_.bytes += bytes;
  ++stats_.entries;
  return true;
}

void feature_cache::clear() {
  rows_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
}

cache_stats feature_cache::stats() const { return stats_; }

namespace {

/// Blocks of `block` sample ids in which sample s sits at row s mod block
/// (each id once, in the first block whose row is free); rows no sample
/// takes repeat the block's first sample. Returns the blocks and, per id,
/// its (block, row).
std::vector<std::vector<int64_t>> canonical_blocks(const std::vector<int64_t>& ids,
                                                   size_t block,
                                                   std::vector<std::pair<size_t, size_t>>& at) {
  std::vector<std::vector<int64_t>> blocks;
  for (int64_t id : ids) {
    const auto row = static_cast<size_t>(id % static_cast<int64_t>(block));
    size_t b = 0;
    while (b < blocks.size() && blocks[b][row] >= 0)
      ++b;
    if (b == blocks.size())
      blocks.emplace_back(block, -1);
    blocks[b][row] = id;
    at.emplace_back(b, row);
  }
  for (auto& ids_of_block : blocks) {
    const int64_t filler = *std::find_if(ids_of_block.begin(), ids_of_block.end(),
                                         [](int64_t id) { return id >= 0; });
    std::replace(ids_of_block.begin(), ids_of_block.end(), int64_t{-1}, filler);
  }
  return blocks;
}

/// The prefix's output rows for `ids`, in canonical blocks (0: one batch).
at::Tensor compute_rows(const layered_model& prefix, const dataset& data,
                        const std::vector<int64_t>& ids, int64_t block_rows) {
  if (block_rows <= 0)
    return prefix.forward(gather(data, ids).first);
  std::vector<std::pair<size_t, size_t>> at;
  const auto blocks = canonical_blocks(ids, static_cast<size_t>(block_rows), at);
  std::vector<at::Tensor> outputs;
  for (const auto& block : blocks)
    outputs.push_back(prefix.forward(gather(data, block).first));
  std::vector<at::Tensor> rows;
  for (const auto& [b, row] : at)
    rows.push_back(outputs[b][static_cast<int64_t>(row)]);
  return torch::stack(rows);
}

} // namespace

at::Tensor frozen_features(const layered_model& prefix, feature_cache* cache,
                           const dataset& data, const std::vector<int64_t>& ids,
                           int64_t block_rows) {
  torch::NoGradGuard no_grad;
  if (cache == nullptr)
    return compute_rows(prefix, data, ids, block_rows);
  if (block_rows <= 0)
    throw error("feature cache: rows must be computed in canonical blocks (block_rows >= 1), "
                "or a cached row may differ from a recomputed one");
  std::vector<at::Tensor> rows(ids.size());
  std::vector<int64_t> missing;  // sample ids to compute
  std::vector<size_t> positions; // their places in `ids`
  for (size_t i = 0; i < ids.size(); ++i) {
    rows[i] = cache->find(ids[i]);
    if (!rows[i].defined()) {
      missing.push_back(ids[i]);
      positions.push_back(i);
    }
  }
  if (!missing.empty()) {
    const at::Tensor computed = compute_rows(prefix, data, missing, block_rows);
    for (size_t k = 0; k < missing.size(); ++k) {
      rows[positions[k]] = computed[static_cast<int64_t>(k)];
      cache->insert(missing[k], rows[positions[k]]);
    }
  }
  return torch::stack(rows);
}

} // namespace baton::model
