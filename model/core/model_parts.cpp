#include "model/core/model_parts.hpp"

#include <cmath>
#include <random>

#include <torch/torch.h>

#include "model/core/random.hpp"

namespace baton::model {

// -- deterministic initialisation ------------------------------------------------

namespace {

/// Fills `t` (float, contiguous) with uniform values in [-bound, bound) from
/// `rng`, in element order: the same on every machine.
void fill_uniform(at::Tensor& t, double bound, std::mt19937_64& rng) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "initialisation expects contiguous float parameters");
  float* data = t.data_ptr<float>();
  const auto b = static_cast<float>(bound);
  for (int64_t i = 0; i < t.numel(); ++i) {
    // top 24 bits -> [0, 1) exactly in float
    const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
    data[i] = (2.0f * u - 1.0f) * b;
  }
}

/// Fills `t` (float, contiguous) with approximately normal values of mean 0
/// and standard deviation `deviation`, in element order: each is the sum of
/// 12 uniforms in [0, 1), minus 6 (Irwin-Hall), which is exact in double
/// arithmetic and needs no libm call (whose last bits may differ between
/// machines). The uniforms come from a SplitMix64 stream keyed by one draw of
/// `rng`: six 64-bit values per element, where the twister would take seconds
/// for resnet18's 11 M weights.
void fill_normal(at::Tensor& t, double deviation, std::mt19937_64& rng) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
              "initialisation expects contiguous float parameters");
  constexpr double two_to_minus_32 = 1.0 / 4294967296.0;
  float* data = t.data_ptr<float>();
  uint64_t state = rng();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double sum = 0;
    for (int k = 0; k < 6; ++k, state += 0x9e3779b97f4a7c15ULL) {
      const uint64_t bits = mix64(state);
      sum += static_cast<double>(bits >> 32) * two_to_minus_32;
      sum += static_cast<double>(bits & 0xffffffffULL) * two_to_minus_32;
    }
    data[i] = static_cast<float>((sum - 6.0) * deviation);
  }
}

} // namespace

void initialise(layered_model& m, uint64_t seed, weight_init weights) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(mix64(seed));
  for (const auto& layer : m.layers()) {
    for (const auto& module : layer.module.ptr()->modules(/*include_self=*/true)) {
      auto params = module->named_parameters(/*recurse=*/false);
      auto* weight = params.find("weight");
      auto* bias = params.find("bias");
      if (weight && weight->dim() == 4 && weights == weight_init::kaiming_fan_out) {
        const double fan_out = static_cast<double>(weight->numel() / weight->size(1));
        fill_normal(*weight, std::sqrt(2.0 / fan_out), rng);
        if (bias)
          bias->zero_();
      } else if (weight && weight->dim() >= 2 && weights == weight_init::kaiming_fan_in) {
        const double fan_in = static_cast<double>((*weight)[0].numel());
        fill_normal(*weight, std::sqrt(2.0 / fan_in), rng);
        if (bias)
          bias->zero_();
      } else if (weight && weight->dim() >= 2) {
        const double bound = 1.0 / std::sqrt(static_cast<double>((*weight)[0].numel()));
        fill_uniform(*weight, bound, rng);
        if (bias)
          fill_uniform(*bias, bound, rng);
      } else if (weight) {
        weight->fill_(1.0);
        if (bias)
          bias->zero_();
      }
    }
  }
}

// -- layers --------------------------------------------------------------------

using torch::nn::AnyModule;

named_layer linear_layer(const char* name, int64_t in, int64_t out, bool bias) {
  return {name, AnyModule(torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)))};
}
named_layer relu_layer(const char* name) { return {name, AnyModule(torch::nn::ReLU())}; }
named_layer flatten_layer(const char* name) { return {name, AnyModule(torch::nn::Flatten())}; }
named_layer batch_norm_layer(const char* name, int64_t features) {
  return {name, AnyModule(torch::nn::BatchNorm1d(
                    torch::nn::BatchNorm1dOptions(features).track_running_stats(false)))};
}

} // namespace baton::model
