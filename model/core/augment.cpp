#include "model/core/augment.hpp"

#include <algorithm>

#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/random.hpp"

namespace baton::model {

augment_draw draw_augmentation(const data_spec::augment_spec& spec, uint64_t seed, int64_t id,
                               int32_t epoch) {
  std::mt19937_64 rng(mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(id)) ^
                            static_cast<uint64_t>(static_cast<uint32_t>(epoch))));
  // Three draws always, in this order: a sample's flip does not depend on
  // whether it is cropped.
  const auto span = static_cast<uint64_t>(2 * std::max<int64_t>(spec.crop, 0) + 1);
  augment_draw d;
  d.top = static_cast<int64_t>(uniform_below(rng, span));
  d.left = static_cast<int64_t>(uniform_below(rng, span));
  d.flip = uniform_below(rng, 2) == 1 && spec.flip;
  return d;
}

at::Tensor augment(const at::Tensor& images, const std::vector<int64_t>& ids, int32_t epoch,
                   const data_spec::augment_spec& spec, uint64_t seed,
                   const std::vector<double>& pad) {
  if (images.dim() != 4 || images.size(0) != static_cast<int64_t>(ids.size()))
    throw error("augment: expected images [N, C, H, W] and one sample id per row, got " +
                std::to_string(images.dim()) + " dimensions and " +
                std::to_string(ids.size()) + " ids");
  const int64_t channels = images.size(1), height = images.size(2), width = images.size(3);
  const int64_t c = spec.crop;
  torch::NoGradGuard no_grad;
  auto padded = torch::empty({images.size(0), channels, height + 2 * c, width + 2 * c},
                             images.options());
  for (int64_t k = 0; k < channels; ++k)
    padded.select(1, k).fill_(pad.empty() ? 0.0 : pad.size() == 1 ? pad[0] : pad.at(k));
  padded.narrow(2, c, height).narrow(3, c, width).copy_(images);
  auto out = torch::empty_like(images);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto d = draw_augmentation(spec, seed, ids[i], epoch);
    auto crop = padded[static_cast<int64_t>(i)].narrow(1, d.top, height).narrow(2, d.left, width);
    out[static_cast<int64_t>(i)].copy_(d.flip ? crop.flip({2}) : crop);
  }
  return out;
}

std::string augment_refusal(const data_spec::augment_spec& spec, const std::string& kind,
                            const std::vector<int64_t>& shape) {
  if (spec.crop < 0)
    return "data.augment.crop is " + std::to_string(spec.crop) + ", expected 0 or more pixels";
  if (!spec.any())
    return "";
  if (kind == "synthetic")
    return "data.augment applies to images; synthetic samples are per-pixel patterns that a "
           "crop or a mirror does not keep (use data.kind fashion-mnist, cifar10, ...)";
  if (shape.size() != 3 || shape[1] < 2 || shape[2] < 2)
    return "data.augment applies to images; these samples are not (a side of one pixel)";
  const int64_t side = std::min(shape[1], shape[2]);
  if (spec.crop >= side)
    return "data.augment.crop is " + std::to_string(spec.crop) + ", expected less than the " +
           "samples' " + std::to_string(side) + " pixels (a crop must keep part of the image)";
  return "";
}

std::string augment_cache_refusal(const std::string& key) {
  return "'" + key + "' is memory, which keeps a training sample's features from the epoch "
         "that first computed them, but data.augment changes the sample every epoch (set " +
         key + ": none, or leave data.augment out)";
}

std::pair<at::Tensor, at::Tensor> gather_training(const dataset& data,
                                                  const std::vector<int64_t>& ids,
                                                  int32_t epoch) {
  auto batch = gather(data, ids);
  if (data.augment.any()) {
    // The raw zero, normalised: (0 - mean) / std per channel.
    std::vector<double> pad;
    const auto& n = data.normalisation;
    for (size_t k = 0; k < n.mean.size(); ++k)
      pad.push_back(-n.mean[k] / n.std[k]);
    batch.first = augment(batch.first, ids, epoch, data.augment, data.augment_seed, pad);
  }
  return batch;
}

} // namespace baton::model
