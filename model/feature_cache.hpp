#pragma once

// The feature cache of a frozen prefix (AutoFreeze caches this way): per
// sample id, the prefix's output, kept in memory under a budget, so that from
// the next epoch on a worker reads it instead of running the frozen forward.
// Samples beyond the budget are recomputed every time. A run with the cache
// ends with exactly the weights of the same run without it (DESIGN invariant
// 9): a frozen prefix never changes, runs in evaluation mode, and must have
// no layer whose output depends on the rest of the batch
// (batch_dependent_layers in freezing.hpp), so a cached row is what
// recomputing it gives.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/dataset.hpp"
#include "model/layered_model.hpp"

namespace baton::model {

/// Counters of a cache (or of several, summed).
struct cache_stats {
  int64_t hits = 0;     ///< lookups answered from the cache
  int64_t misses = 0;   ///< lookups that ran the frozen forward
  int64_t rejected = 0; ///< computed rows not stored: over the budget
  int64_t entries = 0;  ///< rows held
  int64_t bytes = 0;    ///< bytes held (tensor data only)
  int64_t invalidations = 0; ///< times the freeze point changed with rows held
  cache_stats& operator+=(const cache_stats& o);
};

/// One worker's cache. Not thread-safe: one actor owns it.
class feature_cache {
public:
  /// `budget_mb` MiB of tensor data at most (0 stores nothing).
  explicit feature_cache(double budget_mb);

  /// The freeze point the rows were computed for; changing it drops every
  /// row (they are the output of another prefix).
  void set_freeze_point(size_t point);
  size_t freeze_point() const { return freeze_point_; }

  /// The row of `sample`, or an undefined tensor; counts a hit or a miss.
  at::Tensor find(int64_t sample);

  /// Stores a copy of `row` (one sample's output, no batch dimension) when
  /// it fits in the budget; returns whether it was stored.
  bool insert(int64_t sample, const at::Tensor& row);

  /// Drops every row (the counters of hits and misses stay).
  void clear();

  cache_stats stats() const;

private:
  int64_t budget_bytes_;
  size_t freeze_point_ = 0;
  std::unordered_map<int64_t, at::Tensor> rows_;
  cache_stats stats_;
};

/// The frozen prefix's output for the samples `ids` of `data`, in order:
/// rows found in `cache` are read, the others are computed (evaluation
/// mode, NoGradGuard) and offered to the cache; with a null cache every row
/// is computed. `block_rows` = K >= 1 computes rows in canonical blocks:
/// batches of exactly K samples in which sample s always sits at row
/// s mod K (a minibatch takes as many blocks as the most crowded row; free
/// rows repeat a sample of the block). A row's bits then depend on its
/// sample only, never on the other samples of its minibatch, which BLAS and
/// convolution kernels do not promise for a batch of any size and order
/// (OpenBLAS's sgemm rounds a row differently by its position and by the
/// batch's size; a convolution over one image takes another path than over
/// several). That is what makes a cached row equal a recomputed one, given
/// kernels whose arithmetic depends on shapes and positions, not values.
/// 0 computes all missing rows in one batch: fastest, and only valid
/// without a cache (a cache then throws model::error). Precondition: the
/// cache's freeze point is the prefix's.
at::Tensor frozen_features(const layered_model& prefix, feature_cache* cache,
                           const dataset& data, const std::vector<int64_t>& ids,
                           int64_t block_rows = 4);

} // namespace baton::model
