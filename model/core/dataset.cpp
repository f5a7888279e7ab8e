#include "model/core/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <torch/torch.h>

#include "model/core/batches.hpp"
#include "model/core/error.hpp"
#include "model/core/random.hpp"

namespace baton::model {

namespace {

// -- deterministic random numbers (model/core/random.hpp) -----------------------

/// Uniform float in [-1, 1) from the top 24 bits: exact in float arithmetic.
float uniform_signed(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

} // namespace

namespace {

/// Fashion-MNIST in `dir`, the first `limit` samples of each split.
data_spec fashion_mnist_spec(const std::string& dir, int64_t limit) {
  data_spec spec;
  spec.path = dir;
  spec.train_limit = spec.test_limit = limit;
  return spec;
}

} // namespace

int64_t fashion_mnist_size(const std::string& dir, split which) {
  return data_size(fashion_mnist_spec(dir, 0), which);
}

dataset load_fashion_mnist(const std::string& dir, split which, int64_t limit) {
  return load_data(fashion_mnist_spec(dir, limit), which);
}

dataset make_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed) {
  if (n < 0 || c <= 0 || h <= 0 || w <= 0 || classes <= 0)
    throw error("synthetic dataset: expected n >= 0 and positive c, h, w, classes");
  const int64_t per_sample = c * h * w;
  // Each class has a fixed +-0.5 pattern; a sample is its class pattern plus
  // uniform noise of variance 0.75 (total variance 1), so a linear model can
  // learn the labels. The patterns depend on the shape and the number of
  // classes only, not on the seed: a training set and a test set made with
  // different seeds describe the same classes.
  std::mt19937_64 pattern_rng(mix64(0x5eed5eedULL ^ mix64(static_cast<uint64_t>(per_sample)) ^
                                    static_cast<uint64_t>(classes)));
  auto patterns = torch::empty({classes, per_sample}, torch::kFloat32);
  float* pattern = patterns.data_ptr<float>();
  for (int64_t i = 0; i < classes * per_sample; ++i)
    pattern[i] = (pattern_rng() >> 63) ? 0.5f : -0.5f;
  std::mt19937_64 rng(mix64(seed));
  auto labels = torch::empty({n}, torch::kInt64);
  auto images = torch::empty({n, c, h, w}, torch::kFloat32);
  int64_t* label = labels.data_ptr<int64_t>();
  float* pixel = images.data_ptr<float>();
  const float noise_scale = 1.5f; // uniform [-1.5, 1.5) has variance 0.75
  for (int64_t s = 0; s < n; ++s) {
    label[s] = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(classes)));
    const float* p = pattern + label[s] * per_sample;
    float* out = pixel + s * per_sample;
    for (int64_t i = 0; i < per_sample; ++i)
      out[i] = p[i] + noise_scale * uniform_signed(rng);
  }
  dataset out;
  out.name = "synthetic";
  out.images = images;
  out.labels = labels;
  out.classes = classes;
  return out;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int32_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(mix64(mix64(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(epoch))));
  // Fisher-Yates, written out: std::shuffle's use of the engine is
  // implementation-defined, this is the same on every machine.
  for (size_t i = order.size(); i > 1; --i) {
    auto j = static_cast<size_t>(uniform_below(rng, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

int64_t validation_size(int64_t samples, double fraction) {
  if (fraction == 0)
    return 0;
  if (!(fraction > 0 && fraction < 1))
    throw error("data.validation is " + std::to_string(fraction) +
                ", expected a fraction of the training samples above 0 and below 1");
  const auto held = static_cast<int64_t>(std::llround(fraction * static_cast<double>(samples)));
  if (held < 1 || held >= samples)
    throw error("data.validation " + std::to_string(fraction) + " of " +
                std::to_string(samples) + " training samples holds out " +
                std::to_string(held) + " (expected at least one sample for validation and " +
                "one for training: raise data.train_limit or change data.validation)");
  return held;
}

validation_ids validation_split(int64_t samples, double fraction, uint64_t seed) {
  const int64_t held = validation_size(samples, fraction);
  // A shuffle of its own seed, not epoch 0's order: the held-out samples
  // do not depend on how the data is read.
  auto order = epoch_order(samples, derive_seed(seed, "validation"), 0);
  validation_ids out;
  out.validation.assign(order.begin(), order.begin() + held);
  out.train.assign(order.begin() + held, order.end());
  std::sort(out.validation.begin(), out.validation.end());
  std::sort(out.train.begin(), out.train.end());
  return out;
}

std::vector<int64_t> shard(const std::vector<int64_t>& order, int32_t index, int32_t count) {
  if (count <= 0 || index < 0 || index >= count)
    throw error("shard " + std::to_string(index) + " of " + std::to_string(count) +
                ": expected 0 <= index < count");
  const auto n = static_cast<int64_t>(order.size());
  const int64_t base = n / count, extra = n % count;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  const int64_t size = base + (index < extra ? 1 : 0);
  return {order.begin() + begin, order.begin() + begin + size};
}

std::pair<at::Tensor, at::Tensor> gather(const dataset& data, const std::vector<int64_t>& ids) {
  const int64_t n = data.size();
  for (int64_t id : ids)
    if (id < 0 || id >= n)
      throw error(data.name + ": sample id " + std::to_string(id) + " out of range, expected 0.." +
                  std::to_string(n - 1));
  auto index = torch::tensor(ids, torch::kInt64);
  return {data.images.index_select(0, index), data.labels.index_select(0, index)};
}

} // namespace baton::model
