#include "model/core/feature_cache.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/freezing.hpp"

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

/// The inputs of the rows at `positions` of the ids being computed, stacked.
using inputs_of_fn = std::function<at::Tensor(const std::vector<size_t>& positions)>;

/// Blocks of `block` rows in which sample s sits at row s mod block (each
/// id once, in the first block whose row is free); rows no sample takes
/// repeat the block's first sample. Blocks hold positions in `ids`. Returns
/// the blocks and, per id, its (block, row).
std::vector<std::vector<size_t>> canonical_blocks(const std::vector<int64_t>& ids, size_t block,
                                                  std::vector<std::pair<size_t, size_t>>& at) {
  constexpr size_t free_row = std::numeric_limits<size_t>::max();
  std::vector<std::vector<size_t>> blocks;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0)
      throw error("feature cache: sample id " + std::to_string(ids[i]) +
                  " is negative; canonical blocks place sample s at row s mod K");
    const auto row = static_cast<size_t>(ids[i] % static_cast<int64_t>(block));
    size_t b = 0;
    while (b < blocks.size() && blocks[b][row] != free_row)
      ++b;
    if (b == blocks.size())
      blocks.emplace_back(block, free_row);
    blocks[b][row] = i;
    at.emplace_back(b, row);
  }
  for (auto& positions : blocks) {
    const size_t filler = *std::find_if(positions.begin(), positions.end(),
                                        [](size_t p) { return p != free_row; });
    std::replace(positions.begin(), positions.end(), free_row, filler);
  }
  return blocks;
}

/// The prefix's output rows for `ids`, in canonical blocks (0: one batch).
at::Tensor compute_rows(const layered_model& prefix, const std::vector<int64_t>& ids,
                        const inputs_of_fn& inputs_of, int64_t block_rows,
                        int64_t* forwarded_rows) {
  int64_t forwarded = 0;
  at::Tensor result;
  if (block_rows <= 0) {
    std::vector<size_t> all(ids.size());
    std::iota(all.begin(), all.end(), size_t{0});
    result = prefix.forward(inputs_of(all));
    forwarded = static_cast<int64_t>(ids.size());
  } else {
    std::vector<std::pair<size_t, size_t>> at;
    const auto blocks = canonical_blocks(ids, static_cast<size_t>(block_rows), at);
    std::vector<at::Tensor> outputs;
    for (const auto& block : blocks)
      outputs.push_back(prefix.forward(inputs_of(block)));
    std::vector<at::Tensor> rows;
    for (const auto& [b, row] : at)
      rows.push_back(outputs[b][static_cast<int64_t>(row)]);
    result = torch::stack(rows);
    forwarded = static_cast<int64_t>(blocks.size()) * block_rows;
  }
  if (forwarded_rows != nullptr)
    *forwarded_rows += forwarded;
  return result;
}

/// frozen_features over any source of inputs: the one implementation.
at::Tensor cached_rows(const layered_model& prefix, feature_cache* cache,
                       const std::vector<int64_t>& ids, const inputs_of_fn& inputs_of,
                       int64_t block_rows, int64_t* forwarded_rows) {
  torch::NoGradGuard no_grad;
  if (cache == nullptr)
    return compute_rows(prefix, ids, inputs_of, block_rows, forwarded_rows);
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
    // Positions among the missing ids -> positions among all ids.
    auto missing_inputs = [&](const std::vector<size_t>& among_missing) {
      std::vector<size_t> among_all;
      for (size_t k : among_missing)
        among_all.push_back(positions[k]);
      return inputs_of(among_all);
    };
    const at::Tensor computed =
      compute_rows(prefix, missing, missing_inputs, block_rows, forwarded_rows);
    for (size_t k = 0; k < missing.size(); ++k) {
      rows[positions[k]] = computed[static_cast<int64_t>(k)];
      cache->insert(missing[k], rows[positions[k]]);
    }
  }
  return torch::stack(rows);
}

/// The rows at `positions` of `inputs`; `inputs` itself when that is all of
/// them in order (a microbatch in one forward, as without any cache).
at::Tensor rows_at(const at::Tensor& inputs, const std::vector<size_t>& positions) {
  bool all = static_cast<int64_t>(positions.size()) == inputs.size(0);
  for (size_t i = 0; all && i < positions.size(); ++i)
    all = positions[i] == i;
  if (all)
    return inputs;
  std::vector<int64_t> index(positions.begin(), positions.end());
  return inputs.index_select(0, torch::tensor(index, torch::kInt64));
}

} // namespace

at::Tensor frozen_features(const layered_model& prefix, feature_cache* cache,
                           const dataset& data, const std::vector<int64_t>& ids,
                           int64_t block_rows) {
  // Reads the samples it computes only: a hit costs no gather.
  auto inputs_of = [&](const std::vector<size_t>& positions) {
    std::vector<int64_t> samples;
    for (size_t p : positions)
      samples.push_back(ids[p]);
    return gather(data, samples).first;
  };
  return cached_rows(prefix, cache, ids, inputs_of, block_rows, nullptr);
}

at::Tensor frozen_features(const layered_model& prefix, feature_cache* cache,
                           const at::Tensor& inputs, const std::vector<int64_t>& ids,
                           int64_t block_rows, int64_t* forwarded_rows) {
  if (!inputs.defined() || inputs.dim() == 0 || inputs.size(0) != static_cast<int64_t>(ids.size()))
    throw error("frozen features: " + std::to_string(ids.size()) + " sample ids for " +
                (inputs.defined() && inputs.dim() > 0 ? std::to_string(inputs.size(0)) + " rows"
                                                       : std::string{"no rows"}) +
                " of inputs, expected one id per row");
  auto inputs_of = [&](const std::vector<size_t>& positions) { return rows_at(inputs, positions); };
  return cached_rows(prefix, cache, ids, inputs_of, block_rows, forwarded_rows);
}

// -- frozen_backbone ---------------------------------------------------------------

feature_counts& feature_counts::operator+=(const feature_counts& o) {
  train_samples += o.train_samples;
  train_computed += o.train_computed;
  eval_samples += o.eval_samples;
  eval_computed += o.eval_computed;
  forward_rows += o.forward_rows;
  return *this;
}

frozen_backbone::frozen_backbone(layered_model layers, const feature_cache_spec& spec)
    : layers_(std::move(layers)), spec_(spec) {
  if (spec_.block_rows < 0)
    throw error("frozen backbone: expected feature_block >= 0, got " +
                std::to_string(spec_.block_rows));
  if (!spec_.cache)
    return;
  if (spec_.block_rows < 1)
    throw error("frozen backbone: a feature cache needs canonical blocks (feature_block >= 1), "
                "or a cached row may differ from a recomputed one");
  if (auto names = batch_dependent_layers(layers_); !names.empty())
    throw error("frozen backbone: layer '" + names.front() + "' depends on the other samples "
                "of its batch, so its features cannot be cached per sample");
  cache_ = std::make_unique<feature_cache>(spec_.cache_mb);
}

at::Tensor frozen_backbone::features(const at::Tensor& inputs,
                                     const std::vector<int64_t>& samples, bool eval) {
  const int64_t rows = inputs.dim() > 0 ? inputs.size(0) : 0;
  int64_t computed = rows;
  at::Tensor out;
  if (!cache_ && spec_.block_rows <= 0) {
    torch::NoGradGuard no_grad;
    out = layers_.forward(inputs);
    epoch_.forward_rows += rows;
  } else {
    std::vector<int64_t> keys;
    for (int64_t s : samples) {
      if (s < 0 || s >= eval_key_offset)
        throw error("frozen backbone: sample id " + std::to_string(s) + " is outside [0, 2^40)");
      keys.push_back(eval ? s + eval_key_offset : s);
    }
    const int64_t misses_before = cache_ ? cache_->stats().misses : 0;
    out = frozen_features(layers_, cache_.get(), inputs, keys, spec_.block_rows,
                          &epoch_.forward_rows);
    if (cache_)
      computed = cache_->stats().misses - misses_before;
  }
  (eval ? epoch_.eval_samples : epoch_.train_samples) += rows;
  (eval ? epoch_.eval_computed : epoch_.train_computed) += computed;
  return out;
}

feature_counts frozen_backbone::end_epoch() {
  feature_counts done = epoch_;
  total_ += done;
  epochs_.push_back(done);
  epoch_ = {};
  return done;
}

feature_counts frozen_backbone::total() const {
  feature_counts all = total_;
  all += epoch_;
  return all;
}

cache_stats frozen_backbone::stats() const {
  return cache_ ? cache_->stats() : cache_stats{};
}

} // namespace baton::model
