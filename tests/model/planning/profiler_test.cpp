#include "model/planning/profiler.hpp"

#include <map>
#include <string>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "model/core/error.hpp"
#include "model/core/pretrain.hpp"

using baton::model::make_model;
using baton::model::median_of_profiles;
using baton::model::model_profile;
using baton::model::model_spec;
using baton::model::profile_model;
using baton::model::profile_options;

namespace {

constexpr int64_t float_bytes = 4;
constexpr int64_t microbatch = 4;

profile_options quick_options() {
  profile_options options;
  options.microbatch_size = microbatch;
  options.microbatches = 2;
  options.warmups = 1;
  return options;
}

} // namespace

TEST(profiler_test, convnet_layers_have_positive_times_and_exact_sizes) {
  model_spec spec; // convnet
  auto model = baton::model::make_pretrain_model(spec, 10);
  const auto digest = baton::model::weights_digest(model);
  const int threads_before = at::get_num_threads();
  auto profile = profile_model(model, quick_options());
  EXPECT_EQ(at::get_num_threads(), threads_before);
  EXPECT_EQ(baton::model::weights_digest(model), digest); // profiling never steps
  for (const auto& p : model.parameters())
    EXPECT_FALSE(p.grad().defined());

  ASSERT_EQ(profile.layers.size(), model.size());
  EXPECT_EQ(profile.microbatch_size, microbatch);
  EXPECT_EQ(profile.threads, 1);
  EXPECT_GE(profile.cores, 1);
  EXPECT_FALSE(profile.hostname.empty());
  std::map<std::string, baton::model::layer_cost> by_name;
  for (const auto& layer : profile.layers) {
    EXPECT_GT(layer.forward_seconds, 0.0) << layer.name;
    EXPECT_GT(layer.backward_seconds, 0.0) << layer.name;
    by_name[layer.name] = layer;
  }
  EXPECT_EQ(profile.layers.front().name, "conv1");
  EXPECT_EQ(profile.layers.back().name, "fc2");

  // Outputs: microbatch x channels x height x width floats.
  EXPECT_EQ(by_name["conv1"].activation_bytes, microbatch * 32 * 28 * 28 * float_bytes);
  EXPECT_EQ(by_name["pool1"].activation_bytes, microbatch * 32 * 14 * 14 * float_bytes);
  EXPECT_EQ(by_name["conv4"].activation_bytes, microbatch * 64 * 14 * 14 * float_bytes);
  EXPECT_EQ(by_name["pool3"].activation_bytes, microbatch * 128 * 3 * 3 * float_bytes);
  EXPECT_EQ(by_name["flatten"].activation_bytes, microbatch * 1152 * float_bytes);
  EXPECT_EQ(by_name["fc1"].activation_bytes, microbatch * 256 * float_bytes);
  EXPECT_EQ(by_name["fc2"].activation_bytes, microbatch * 10 * float_bytes);
  // Parameters: weights + biases.
  EXPECT_EQ(by_name["conv1"].parameter_bytes, (32 * 1 * 9 + 32) * float_bytes);
  EXPECT_EQ(by_name["conv2"].parameter_bytes, (32 * 32 * 9 + 32) * float_bytes);
  EXPECT_EQ(by_name["conv5"].parameter_bytes, (128 * 64 * 9 + 128) * float_bytes);
  EXPECT_EQ(by_name["fc1"].parameter_bytes, (1152 * 256 + 256) * float_bytes);
  EXPECT_EQ(by_name["fc2"].parameter_bytes, (256 * 10 + 10) * float_bytes);
  EXPECT_EQ(by_name["relu1"].parameter_bytes, 0);
  EXPECT_EQ(by_name["pool2"].parameter_bytes, 0);
  int64_t total = 0;
  for (const auto& layer : profile.layers)
    total += layer.parameter_bytes;
  EXPECT_EQ(total, baton::model::parameter_count(model) * float_bytes);
}

TEST(profiler_test, a_convolution_s_weight_half_is_timed_only_when_asked) {
  model_spec spec; // convnet
  auto model = baton::model::make_pretrain_model(spec, 10);
  auto asked = profile_model(model, quick_options());
  auto options = quick_options();
  options.weight_gradients = false;
  auto skipped = profile_model(model, options);
  ASSERT_EQ(asked.layers.size(), skipped.layers.size());
  for (size_t k = 0; k < asked.layers.size(); ++k) {
    const auto& name = asked.layers[k].name;
    // The first convolution's input is the model's, never handed on.
    if (name.rfind("conv", 0) == 0 && name != "conv1")
      EXPECT_GT(asked.layers[k].weight_gradient_seconds, 0.0) << name;
    else
      EXPECT_EQ(asked.layers[k].weight_gradient_seconds, 0.0) << name;
    EXPECT_EQ(skipped.layers[k].weight_gradient_seconds, 0.0) << name;
    EXPECT_GT(skipped.layers[k].backward_seconds, 0.0) << name;
  }
}

TEST(profiler_test, mlp_sizes_follow_the_microbatch) {
  model_spec spec;
  spec.name = "mlp";
  auto model = make_model(spec);
  auto options = quick_options();
  options.microbatch_size = 8;
  auto profile = profile_model(model, options);
  ASSERT_EQ(profile.layers.size(), 8u);
  EXPECT_EQ(profile.layers[1].name, "fc1");
  EXPECT_EQ(profile.layers[1].parameter_bytes, 784 * 4096 * float_bytes);
  EXPECT_EQ(profile.layers[1].activation_bytes, 8 * 4096 * float_bytes);
  EXPECT_EQ(profile.layers[2].parameter_bytes, 2 * 4096 * float_bytes); // batch norm
  // Training computes no gradient for the flatten in front of the first
  // parameter (its input is the data): its backward costs nothing there.
  EXPECT_EQ(profile.layers[0].name, "flatten");
  EXPECT_EQ(profile.layers[0].backward_seconds, 0.0);
  for (size_t k = 1; k < profile.layers.size(); ++k)
    EXPECT_GT(profile.layers[k].backward_seconds, 0.0) << profile.layers[k].name;
}

// min_timed_seconds adds timed microbatches until they took that long (a
// Linear(8 -> 2) over 4 samples takes microseconds: 2 never take 20 ms), up
// to max_timed_microbatches, and the profile says how many it timed.
TEST(profiler_test, a_small_model_is_timed_for_min_timed_seconds) {
  model_spec spec;
  spec.name = "classifier";
  spec.features = 8;
  spec.classes = 2;
  auto model = make_model(spec);
  auto options = quick_options();
  options.sample_shape = {8};
  EXPECT_EQ(profile_model(model, options).microbatches, 2);
  options.min_timed_seconds = 0.02;
  const auto profile = profile_model(model, options);
  EXPECT_GT(profile.microbatches, 2);
  EXPECT_LE(profile.microbatches, baton::model::max_timed_microbatches);
}

// A figure over the timed microbatches: the planner's median (a slow one
// moves nothing) or the cost model's mean (a run's step is its steps' mean);
// a figure of nothing is refused.
TEST(profiler_test, a_figure_is_the_median_or_the_mean_of_the_timed_microbatches) {
  using baton::model::profile_figure;
  using baton::model::profile_statistic;
  EXPECT_DOUBLE_EQ(profile_figure({1, 10, 2}, profile_statistic::median), 2);
  EXPECT_DOUBLE_EQ(profile_figure({1, 10, 2, 3}, profile_statistic::median), 3);
  EXPECT_DOUBLE_EQ(profile_figure({1, 10, 2, 3}, profile_statistic::mean), 4);
  EXPECT_THROW(profile_figure({}, profile_statistic::mean), baton::model::error);
  // A whole profile by its means: positive figures, as many microbatches.
  model_spec spec;
  spec.name = "classifier";
  spec.features = 8;
  spec.classes = 2;
  auto options = quick_options();
  options.sample_shape = {8};
  options.statistic = profile_statistic::mean;
  const auto profile = profile_model(make_model(spec), options);
  EXPECT_EQ(profile.microbatches, 2);
  for (const auto& l : profile.layers)
    EXPECT_GT(l.forward_seconds, 0) << l.name;
}

// Profiles taken at different moments: each figure the median of its own,
// the timed microbatches summed; profiles of other layers are refused.
TEST(profiler_test, the_median_of_profiles_is_taken_figure_by_figure) {
  auto profile = [](double forward, double backward, double update) {
    model_profile p;
    p.model = "m";
    p.microbatches = 10;
    p.layers = {{"a", forward, backward, 64, 8, update}, {"b", 2 * forward, 1, 32, 0, 0}};
    return p;
  };
  const auto m = median_of_profiles({profile(1, 5, 0.3), profile(3, 4, 0.1), profile(2, 6, 0.2)});
  EXPECT_EQ(m.microbatches, 30);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_seconds, 2);
  EXPECT_DOUBLE_EQ(m.layers[0].backward_seconds, 5);
  EXPECT_DOUBLE_EQ(m.layers[0].update_seconds, 0.2);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_seconds, 4);
  EXPECT_EQ(m.layers[1].activation_bytes, 32);
  EXPECT_EQ(median_of_profiles({profile(7, 1, 0)}).layers[0].forward_seconds, 7);
  auto other = profile(1, 1, 0);
  other.layers[1].name = "c";
  EXPECT_THROW(median_of_profiles({profile(1, 1, 0), other}), baton::model::error);
  EXPECT_THROW(median_of_profiles({}), baton::model::error);
}

TEST(profiler_test, wrong_input_shape_names_the_layer) {
  model_spec spec; // convnet expects 1 channel
  auto model = make_model(spec);
  auto options = quick_options();
  options.sample_shape = {3, 28, 28};
  try {
    profile_model(model, options);
    FAIL() << "expected an error";
  } catch (const baton::model::error& e) {
    EXPECT_NE(std::string(e.what()).find("'conv1'"), std::string::npos) << e.what();
  }
  options = quick_options();
  options.microbatches = 0;
  EXPECT_THROW(profile_model(model, options), baton::model::error);
}
