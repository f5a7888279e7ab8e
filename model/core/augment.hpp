#pragma once

// Training-time augmentation of image batches (the workload's
// `data.augment: {crop, flip}`): a random crop after zero padding and a
// horizontal flip, as torchvision's RandomCrop(padding) and
// RandomHorizontalFlip. Every draw is a function of (seed, sample id,
// epoch) alone, so every strategy and layout, however it cuts an epoch into
// microbatches and workers, trains on the same augmented samples and ends
// with the same weights. Every training batch of every strategy is cut by
// gather_training.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// What augmentation draws for one sample in one epoch.
struct augment_draw {
  int64_t top = 0;   ///< rows of the padded image above the crop, 0 to 2 x crop
  int64_t left = 0;  ///< columns left of it, 0 to 2 x crop
  bool flip = false; ///< mirrored left-right
};

/// The draws of sample `id` in epoch `epoch`: crop offsets (0 when
/// spec.crop is 0) and the flip (false unless spec.flip).
augment_draw draw_augmentation(const data_spec::augment_spec& spec, uint64_t seed, int64_t id,
                               int32_t epoch);

/// `images` [N, C, H, W] of samples `ids` (one per row) in epoch `epoch`,
/// augmented: each padded by spec.crop pixels on every side with the raw
/// samples' zero (black; `pad` per channel, or one value for all: the
/// normalised zero, -mean / std), cut back to H x W at its draw's offset,
/// then mirrored when its draw says so. A new tensor; `images` is left as
/// it is. Throws model::error on a batch that is not [N, C, H, W] with one id per
/// row.
at::Tensor augment(const at::Tensor& images, const std::vector<int64_t>& ids, int32_t epoch,
                   const data_spec::augment_spec& spec, uint64_t seed,
                   const std::vector<double>& pad);

/// Why `spec` cannot augment samples of `shape` [C, H, W] of data kind
/// `kind`, "" when it can: crop below 0 or not below min(H, W) (a crop must
/// keep a pixel of the image), or samples that are not images (synthetic
/// data's per-pixel patterns, which a shift or a mirror does not keep; a
/// side of 1 pixel).
std::string augment_refusal(const data_spec::augment_spec& spec, const std::string& kind,
                            const std::vector<int64_t>& shape);

/// Why a feature cache (`key`: transfer's backbone.cache, data-parallel's
/// freeze.cache) cannot run with data.augment: it keeps a training
/// sample's features from the epoch that first computed them, while the
/// augmentation changes the sample every epoch.
std::string augment_cache_refusal(const std::string& key);

/// A training batch: gather(data, ids), augmented for `epoch` when the
/// dataset carries an augmentation (dataset::augment, set by load_splits
/// on the training part only).
std::pair<at::Tensor, at::Tensor> gather_training(const dataset& data,
                                                  const std::vector<int64_t>& ids,
                                                  int32_t epoch);

} // namespace baton::model
