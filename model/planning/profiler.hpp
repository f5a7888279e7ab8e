#pragma once

// Per-layer costs of a layered model on this machine: what the partitioner
// (model/planning/partitioner.hpp) plans with. Each layer is timed inside a forward
// and backward of the whole model, on synthetic data.

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/specs.hpp"
#include "model/planning/partitioner.hpp"

namespace baton::model {

class layered_model;
struct named_layer;

/// What each layer's figure is over the timed microbatches.
enum class profile_statistic {
  /// The planner's: one slow spell of a shared host must not move a stage
  /// boundary.
  median,
  /// The cost model's: a run's step is the mean of its steps, which a
  /// shared host's slow spells lengthen (pass times' mean / median 1.02-1.09
  /// on this 2-core VM, docs/cost-model.md).
  mean,
};

/// The median (the upper middle of an even count) or the mean of `xs` (not
/// empty).
double profile_figure(std::vector<double> xs, profile_statistic statistic);

/// How to profile.
struct profile_options {
  int64_t microbatch_size = 32;                   ///< samples per timed microbatch
  std::vector<int64_t> sample_shape{1, 28, 28};   ///< one input sample (C, H, W)
  int32_t microbatches = 10;                      ///< timed microbatches (`statistic` taken)
  profile_statistic statistic = profile_statistic::median;
  /// More timed microbatches until they took this long (at most
  /// max_timed_microbatches): a small model's 10 passes of a few ms are
  /// one spell of the host, and its first passes run slow.
  double min_timed_seconds = 0;
  int32_t warmups = 2;                            ///< untimed microbatches first
  int32_t threads = 1;                            ///< torch intra-op threads while profiling
  uint64_t seed = 0;                              ///< synthetic input seed
  optimizer_spec optimizer;                       ///< whose step is timed (update_seconds)
  /// false: forward only, without autograd, as frozen stages run it
  /// (backward_seconds stay 0).
  bool backward = true;
  /// Time each convolution's weight half on its own after the backward
  /// (weight_gradient_seconds: what `baton plan` offers to hand on, and the
  /// cost of a stage list naming `weight_gradient: next`); a plan that never
  /// hands one on (`stages: auto` at a run's start) skips it.
  bool weight_gradients = true;
};

/// The measured costs of a model.
struct model_profile {
  std::string model;            ///< model name, as the topology says it
  int64_t microbatch_size = 0;
  std::vector<int64_t> sample_shape; ///< C, H, W of a sample (empty: a file that has none)
  int32_t microbatches = 0;     ///< timed microbatches per figure
  int32_t threads = 1;
  std::string hostname;
  int32_t cores = 0;            ///< hardware threads of this machine
  std::vector<layer_cost> layers;
};

/// The most microbatches min_timed_seconds adds up to.
inline constexpr int32_t max_timed_microbatches = 1000;

/// Times every layer of `m` in the context of training: one forward over the
/// whole model with autograd recording and one backward through it (a
/// ones-like gradient on the last output), the layers timed by timestamps
/// between them and by a hook on each output that marks the start of its
/// layer's backward; each figure is the `statistic` over `microbatches` after
/// `warmups` (more while the timed ones took less than min_timed_seconds;
/// model_profile::microbatches says how many). The first layer computes no
/// input gradient (as in training).
/// update_seconds is one out-of-place SGD step of the layer's parameters
/// with `options.optimizer` (as a stage steps; 0 without parameters).
/// activation_bytes is the output's size and parameter_bytes the layer's
/// parameters' size, exactly. With `options.backward` false, the forward
/// runs under a no-grad guard and nothing else is timed. Sets torch's
/// intra-op threads to `threads` and restores them afterwards. The model's
/// parameters get gradients (cleared again); their values do not change.
/// Throws model::error when a layer rejects the input shape.
model_profile profile_model(const layered_model& m, const profile_options& options);

/// The bytes of `layer`'s parameters (its children's included): a
/// profile's parameter_bytes.
int64_t parameter_bytes(const named_layer& layer);

/// Profiles of one model taken at different moments as one: every layer's
/// forward, backward and update the median over them (the upper middle of
/// an even count), the rest as the first says, `microbatches` their sum.
/// Throws model::error when `profiles` is empty or their layers differ.
model_profile median_of_profiles(const std::vector<model_profile>& profiles);

} // namespace baton::model
