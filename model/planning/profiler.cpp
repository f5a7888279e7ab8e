#include "model/planning/profiler.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/stage_trainer.hpp"

namespace baton::model {

int64_t parameter_bytes(const named_layer& layer) {
  int64_t bytes = 0;
  for (const auto& p : layer.module.ptr()->parameters(/*recurse=*/true))
    bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

namespace {

using clock = std::chrono::steady_clock;

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "unknown";
  return name;
}

void clear_gradients(const named_layer& layer) {
  auto parameters = layer.module.ptr()->parameters(/*recurse=*/true);
  model::clear_gradients(parameters);
}

/// One optimiser step of a layer's parameters as a training stage takes it
/// while a microbatch in flight holds its weights (model::sgd_step_out_of_place
/// on gradients of the same shapes). A stage that steps with none in flight
/// (1f1b's last, the flush schedules') steps in place, a little faster
/// (model/core/stage_trainer.cpp): the profile keeps the out-of-place figure.
double time_update(const named_layer& layer, const optimizer_spec& optimizer) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parameters, gradients, momenta;
  for (const auto& p : layer.module.ptr()->parameters(/*recurse=*/true)) {
    parameters.push_back(p.detach());
    gradients.push_back(torch::ones_like(p));
    momenta.push_back(torch::zeros_like(p));
  }
  const auto started = clock::now();
  for (size_t i = 0; i < parameters.size(); ++i)
    sgd_step_out_of_place(parameters[i], gradients[i], momenta[i], optimizer, false);
  return std::chrono::duration<double>(clock::now() - started).count();
}

/// The median of `xs` (not empty; reordered).
double median(std::vector<double>& xs) {
  auto middle = xs.begin() + static_cast<std::ptrdiff_t>(xs.size() / 2);
  std::nth_element(xs.begin(), middle, xs.end());
  return *middle;
}

/// Restores torch's intra-op thread count when profiling ends (also on error).
class thread_budget {
public:
  explicit thread_budget(int32_t threads) : saved_(at::get_num_threads()) {
    at::set_num_threads(threads);
  }
  ~thread_budget() { at::set_num_threads(saved_); }
  thread_budget(const thread_budget&) = delete;
  thread_budget& operator=(const thread_budget&) = delete;

private:
  int saved_;
};

/// Runs a layer, naming it in the error when it rejects its input.
at::Tensor run_layer(const named_layer& layer, const at::Tensor& input) {
  try {
    return const_cast<torch::nn::AnyModule&>(layer.module).forward(input);
  } catch (const c10::Error& e) {
    throw error("profiling layer '" + layer.name + "': its forward rejected an input of shape " +
                c10::str(input.sizes()) + " (" + e.what_without_backtrace() + ")");
  }
}

/// What one pass measured of one layer.
struct layer_pass {
  double forward_seconds = 0;
  double backward_seconds = 0;
  double weight_gradient_seconds = 0; ///< a convolution's weight half, timed alone
  int64_t activation_bytes = 0;
};

/// One microbatch through the whole model, as training runs it: one forward
/// graph over every layer and one backward through it. Each layer is timed
/// in that context (its input is its predecessor's output, caches as warm or
/// cold as in training): forward by timestamps between layers, backward by a
/// hook on each layer's output, which autograd calls just before that
/// layer's backward starts. Layers timed alone on detached inputs summed to
/// 1.35x the measured training step of the convnet, and not evenly: plans
/// made from them were unbalanced. Without `backward`, the forwards run with
/// autograd off, as a frozen stage runs them (backward times stay 0). With
/// `weight_gradients`, each convolution's weight half is timed after the
/// backward. One entry per layer.
std::vector<layer_pass> profile_pass(const layered_model& m, const at::Tensor& input,
                                     bool backward, bool weight_gradients) {
  const size_t n = m.size();
  std::vector<at::Tensor> outputs(n);
  std::vector<clock::time_point> forward_ends(n);
  std::optional<torch::NoGradGuard> no_grad;
  if (!backward)
    no_grad.emplace();
  const auto forward_start = clock::now();
  at::Tensor x = input;
  for (size_t k = 0; k < n; ++k) {
    x = run_layer(m.layers()[k], x);
    forward_ends[k] = clock::now();
    outputs[k] = x;
  }
  // backward_starts[k]: when layer k's backward began; a layer whose
  // output needs no gradient (no parameter before it) has no backward.
  std::vector<std::optional<clock::time_point>> backward_starts(n);
  std::vector<double> weight_halves(n, 0.0);
  clock::time_point backward_end;
  if (backward && outputs[n - 1].requires_grad()) {
    for (size_t k = 0; k < n; ++k)
      if (outputs[k].requires_grad())
        outputs[k].register_hook([&backward_starts, k](const at::Tensor&) {
          backward_starts[k] = clock::now();
        });
    outputs[n - 1].backward(torch::ones_like(outputs[n - 1]));
    backward_end = clock::now();
    // The part of a convolution's backward that the next stage could run
    // when a stage ends with it (weight_gradient: next), timed on its input
    // in the pass (the first layer's input is a stage's, never handed on).
    for (size_t k = 1; weight_gradients && k < n; ++k)
      if (auto conv = boundary_convolution(m.layers()[k])) {
        const auto began = clock::now();
        convolution_weight_gradients(*conv, outputs[k - 1].detach(),
                                     torch::ones_like(outputs[k]));
        weight_halves[k] = std::chrono::duration<double>(clock::now() - began).count();
      }
    for (const auto& layer : m.layers())
      clear_gradients(layer);
  }
  std::vector<layer_pass> out(n);
  for (size_t k = 0; k < n; ++k) {
    out[k].activation_bytes = static_cast<int64_t>(outputs[k].nbytes());
    out[k].weight_gradient_seconds = weight_halves[k];
    auto began = k == 0 ? forward_start : forward_ends[k - 1];
    out[k].forward_seconds = std::chrono::duration<double>(forward_ends[k] - began).count();
    if (!backward_starts[k])
      continue;
    // Layer k's backward lasts until the one before it starts (or the end).
    auto until = backward_end;
    for (size_t j = k; j-- > 0;)
      if (backward_starts[j]) {
        until = *backward_starts[j];
        break;
      }
    out[k].backward_seconds = std::chrono::duration<double>(until - *backward_starts[k]).count();
  }
  return out;
}

} // namespace

double profile_figure(std::vector<double> xs, profile_statistic statistic) {
  if (xs.empty())
    throw error("profile: no timed microbatch to take a figure of");
  if (statistic == profile_statistic::median)
    return median(xs);
  double sum = 0;
  for (double x : xs)
    sum += x;
  return sum / static_cast<double>(xs.size());
}

model_profile median_of_profiles(const std::vector<model_profile>& profiles) {
  if (profiles.empty())
    throw error("profiles: none to take the median of");
  model_profile out = profiles.front();
  out.microbatches = 0;
  for (const auto& p : profiles) {
    bool same = p.layers.size() == out.layers.size();
    for (size_t k = 0; same && k < p.layers.size(); ++k)
      same = p.layers[k].name == out.layers[k].name;
    if (!same)
      throw error("profiles: the median of profiles of different layers");
    out.microbatches += p.microbatches;
  }
  for (size_t k = 0; k < out.layers.size(); ++k) {
    auto median_by = [&](double layer_cost::*figure) {
      std::vector<double> xs;
      for (const auto& p : profiles)
        xs.push_back(p.layers[k].*figure);
      return median(xs);
    };
    out.layers[k].forward_seconds = median_by(&layer_cost::forward_seconds);
    out.layers[k].backward_seconds = median_by(&layer_cost::backward_seconds);
    out.layers[k].update_seconds = median_by(&layer_cost::update_seconds);
    out.layers[k].weight_gradient_seconds = median_by(&layer_cost::weight_gradient_seconds);
  }
  return out;
}

model_profile profile_model(const layered_model& m, const profile_options& options) {
  if (options.microbatch_size < 1 || options.microbatches < 1 || options.warmups < 0 ||
      options.threads < 1)
    throw error("profile: expected microbatch_size >= 1, microbatches >= 1, warmups >= 0 and "
                "threads >= 1");
  model_profile profile;
  profile.microbatch_size = options.microbatch_size;
  profile.sample_shape = options.sample_shape;
  profile.threads = options.threads;
  profile.hostname = this_hostname();
  profile.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  for (const auto& layer : m.layers())
    profile.layers.push_back({layer.name, 0.0, 0.0, 0, parameter_bytes(layer)});

  thread_budget budget(options.threads);
  std::vector<int64_t> shape{options.microbatch_size};
  shape.insert(shape.end(), options.sample_shape.begin(), options.sample_shape.end());
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const auto input = at::randn(shape, generator, torch::kFloat32);
  // Each layer's figure is the median over the timed microbatches: on a
  // shared host one slow spell must not move a plan's stage boundary.
  std::vector<std::vector<double>> forwards(m.size()), backwards(m.size()), updates(m.size()),
    weight_gradients(m.size());
  double timed_seconds = 0;
  auto more = [&](int32_t pass) {
    const int32_t timed = pass - options.warmups;
    return timed < options.microbatches ||
           (timed_seconds < options.min_timed_seconds && timed < max_timed_microbatches);
  };
  for (int32_t pass = 0; more(pass); ++pass) {
    const auto started = std::chrono::steady_clock::now();
    auto measured = profile_pass(m, input, options.backward, options.weight_gradients);
    for (size_t k = 0; k < m.size(); ++k) {
      auto update = options.backward && profile.layers[k].parameter_bytes > 0
                      ? time_update(m.layers()[k], options.optimizer)
                      : 0.0;
      profile.layers[k].activation_bytes = measured[k].activation_bytes;
      if (pass < options.warmups)
        continue;
      forwards[k].push_back(measured[k].forward_seconds);
      backwards[k].push_back(measured[k].backward_seconds);
      updates[k].push_back(update);
      weight_gradients[k].push_back(measured[k].weight_gradient_seconds);
    }
    if (pass >= options.warmups)
      timed_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  profile.microbatches = static_cast<int32_t>(forwards.empty() ? 0 : forwards.front().size());
  for (size_t k = 0; k < m.size(); ++k) {
    profile.layers[k].forward_seconds = profile_figure(forwards[k], options.statistic);
    profile.layers[k].backward_seconds = profile_figure(backwards[k], options.statistic);
    profile.layers[k].update_seconds = profile_figure(updates[k], options.statistic);
    // Never more than the layer's whole backward (two clocks, one median each).
    profile.layers[k].weight_gradient_seconds =
      std::min(profile_figure(weight_gradients[k], options.statistic),
               profile.layers[k].backward_seconds);
  }
  return profile;
}

} // namespace baton::model
