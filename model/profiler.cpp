#include "model/profiler.hpp"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::model {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "unknown";
  return name;
}

int64_t parameter_bytes(const named_layer& layer) {
  int64_t bytes = 0;
  for (const auto& p : layer.module.ptr()->parameters(/*recurse=*/true))
    bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

void clear_gradients(const named_layer& layer) {
  for (auto& p : layer.module.ptr()->parameters(/*recurse=*/true))
    p.mutable_grad() = at::Tensor();
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

/// One pass over every layer: each layer is timed on the (detached) output
/// of the previous one; `timed` adds the times to `out`. Without `backward`,
/// forwards run with autograd off, as a frozen stage runs them.
void profile_pass(const layered_model& m, at::Tensor x, bool timed, bool backward,
                  std::vector<layer_cost>& out) {
  for (size_t k = 0; k < m.size(); ++k) {
    const auto& layer = m.layers()[k];
    auto& module = const_cast<torch::nn::AnyModule&>(layer.module);
    auto input = x.detach().requires_grad_(backward);
    at::Tensor output;
    auto started = clock::now();
    try {
      std::optional<torch::NoGradGuard> no_grad;
      if (!backward)
        no_grad.emplace();
      output = module.forward(input);
    } catch (const c10::Error& e) {
      throw error("profiling layer '" + layer.name + "': its forward rejected an input of shape " +
                  c10::str(input.sizes()) + " (" + e.what_without_backtrace() + ")");
    }
    const double forward = seconds_since(started);
    double backward_time = 0;
    if (backward) {
      auto gradient = torch::ones_like(output);
      started = clock::now();
      output.backward(gradient);
      backward_time = seconds_since(started);
      clear_gradients(layer);
    }
    if (timed) {
      out[k].forward_seconds += forward;
      out[k].backward_seconds += backward_time;
    }
    out[k].activation_bytes = static_cast<int64_t>(output.nbytes());
    x = output.detach();
  }
}

} // namespace

model_profile profile_model(const layered_model& m, const profile_options& options) {
  if (options.microbatch_size < 1 || options.microbatches < 1 || options.warmups < 0 ||
      options.threads < 1)
    throw error("profile: expected microbatch_size >= 1, microbatches >= 1, warmups >= 0 and "
                "threads >= 1");
  model_profile profile;
  profile.microbatch_size = options.microbatch_size;
  profile.microbatches = options.microbatches;
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
  for (int32_t pass = 0; pass < options.warmups + options.microbatches; ++pass)
    profile_pass(m, input, pass >= options.warmups, options.backward, profile.layers);
  for (auto& layer : profile.layers) {
    layer.forward_seconds /= options.microbatches;
    layer.backward_seconds /= options.microbatches;
  }
  return profile;
}

} // namespace baton::model
