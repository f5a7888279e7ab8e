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
#include <memory>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

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

/// The same for inputs at hand (a microbatch's images): row i of `inputs` is
/// sample `ids[i]` (the cache key; >= 0 with block_rows >= 1). Gives exactly
/// the rows of the dataset form above for the same samples, which reads the
/// rows it computes and calls this one. `forwarded_rows`, when given, grows
/// by the rows the prefix ran (the repeated rows of canonical blocks
/// included). Throws model::error when inputs and ids disagree in length.
at::Tensor frozen_features(const layered_model& prefix, feature_cache* cache,
                           const at::Tensor& inputs, const std::vector<int64_t>& ids,
                           int64_t block_rows = 4, int64_t* forwarded_rows = nullptr);

// -- a frozen backbone with its cache -----------------------------------------------

/// Cache keys of test-split samples: sample id + this, so that they never
/// meet the training split's ids (both count from 0). Sample ids must be
/// below it (a data set of 2^40 samples is not in sight).
inline constexpr int64_t eval_key_offset = int64_t{1} << 40;

/// What a frozen backbone did, per split: samples asked for and how many of
/// them it computed (the others came from its cache).
struct feature_counts {
  int64_t train_samples = 0;  ///< training samples whose features were asked for
  int64_t train_computed = 0; ///< of those, run through the backbone
  int64_t eval_samples = 0;   ///< test-split samples asked for
  int64_t eval_computed = 0;  ///< of those, run through the backbone
  int64_t forward_rows = 0;   ///< rows the backbone ran (canonical blocks' repeats included)
  feature_counts& operator+=(const feature_counts& o);
};

/// A frozen backbone (evaluation mode, no gradient) and its feature cache:
/// what the transfer job's stage and its `--mode local` reference both run,
/// so that they compute every row the same way. Not thread-safe.
class frozen_backbone {
public:
  /// Throws model::error for a cache without canonical blocks (block_rows
  /// < 1), a negative budget, or layers whose output depends on the batch
  /// (batch_dependent_layers): their rows could not be cached.
  frozen_backbone(layered_model layers, const feature_cache_spec& spec);

  /// The features of `inputs`, whose row i is sample `samples[i]` of the
  /// training split (or of the test split with `eval`). Without cache and
  /// blocks this is one forward and `samples` may be empty; otherwise it
  /// needs one id in [0, eval_key_offset) per row (else model::error).
  at::Tensor features(const at::Tensor& inputs, const std::vector<int64_t>& samples, bool eval);

  /// The counts since the last call (an epoch's), kept in epochs(); then
  /// starts counting anew.
  feature_counts end_epoch();
  /// The counts of every ended epoch, in order.
  const std::vector<feature_counts>& epochs() const { return epochs_; }
  /// The counts of the whole run, this epoch's included.
  feature_counts total() const;
  /// The cache's counters (zeros without a cache).
  cache_stats stats() const;
  const feature_cache_spec& spec() const { return spec_; }
  const layered_model& layers() const { return layers_; }

private:
  layered_model layers_;
  feature_cache_spec spec_;
  std::unique_ptr<feature_cache> cache_;
  feature_counts epoch_;
  feature_counts total_;
  std::vector<feature_counts> epochs_;
};

} // namespace baton::model
