#include "model/core/stage_trainer.hpp"

#include <optional>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/core/error.hpp"

namespace baton::model {

namespace {

/// Evaluation mode for the lifetime of the scope, then training mode again
/// (a stage_trainer's layers are in training mode between calls), also when
/// the forward throws.
class evaluation_scope {
public:
  explicit evaluation_scope(layered_model& m) : model_(m) { model_.train(false); }
  ~evaluation_scope() { model_.train(true); }
  evaluation_scope(const evaluation_scope&) = delete;
  evaluation_scope& operator=(const evaluation_scope&) = delete;

private:
  layered_model& model_;
};

/// Copies of a model's buffers, put back when the scope ends. The buffers
/// must not be written between a forward and its backward (autograd saved
/// them and checks their version), so the scope has to end after backward.
class buffers_kept {
public:
  explicit buffers_kept(const layered_model& m) : buffers_(m.buffers()) {
    for (const auto& b : buffers_)
      copies_.push_back(b.clone());
  }
  ~buffers_kept() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i)
      buffers_[i].copy_(copies_[i]);
  }
  buffers_kept(const buffers_kept&) = delete;
  buffers_kept& operator=(const buffers_kept&) = delete;

private:
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> copies_;
};

} // namespace

namespace {

/// Whether the fused step applies: three contiguous float32 tensors of one
/// shape, the momentum buffer not sharing the others' memory (it is written).
bool fusable(const at::Tensor& parameter, const at::Tensor& gradient,
             const at::Tensor& momentum) {
  for (const auto* t : {&parameter, &gradient, &momentum})
    if (!t->defined() || t->scalar_type() != at::kFloat || !t->is_contiguous() ||
        !t->sizes().equals(parameter.sizes()))
      return false;
  return momentum.data_ptr() != parameter.data_ptr() &&
         momentum.data_ptr() != gradient.data_ptr();
}

/// The step in one pass over the elements (the ATen version below takes
/// four, each allocating: resnet18's layer4 stepped in 28 ms that way and in
/// 11 ms this way, memory-bound), into `next` (`parameter` itself for a
/// step in place: each element is read before it is written). Same
/// operations in the same order per element.
void fused_sgd_step(const at::Tensor& parameter, const at::Tensor& gradient,
                    at::Tensor& momentum, const optimizer_spec& optimizer, bool first,
                    at::Tensor& next) {
  const float lr = static_cast<float>(optimizer.lr);
  const float mu = static_cast<float>(optimizer.momentum);
  const float decay = static_cast<float>(optimizer.weight_decay);
  const float* p = parameter.data_ptr<float>();
  const float* g = gradient.data_ptr<float>();
  float* m = momentum.data_ptr<float>();
  float* n = next.data_ptr<float>();
  at::parallel_for(0, parameter.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float grad = decay != 0 ? g[i] + decay * p[i] : g[i];
      if (mu != 0) {
        m[i] = first ? grad : m[i] * mu + grad;
        grad = m[i];
      }
      n[i] = p[i] - lr * grad;
    }
  });
}

} // namespace

at::Tensor sgd_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                 at::Tensor& momentum, const optimizer_spec& optimizer,
                                 bool first) {
  torch::NoGradGuard no_grad;
  if (fusable(parameter, gradient, momentum)) {
    auto next = at::empty_like(parameter);
    fused_sgd_step(parameter, gradient, momentum, optimizer, first, next);
    return next;
  }
  auto grad = gradient;
  if (optimizer.weight_decay != 0)
    grad = grad + optimizer.weight_decay * parameter;
  // torch::optim::SGD's arithmetic (its momentum buffer starts as the first
  // gradient), but out of place: version v's tensors stay intact.
  momentum = first && optimizer.momentum != 0 ? grad.clone()
                                              : momentum * optimizer.momentum + grad;
  auto update = optimizer.momentum != 0 ? momentum : grad;
  return parameter - optimizer.lr * update;
}

void sgd_step_in_place(at::Tensor& parameter, const at::Tensor& gradient, at::Tensor& momentum,
                       const optimizer_spec& optimizer, bool first) {
  torch::NoGradGuard no_grad;
  if (fusable(parameter, gradient, momentum) && gradient.data_ptr() != parameter.data_ptr())
    return fused_sgd_step(parameter, gradient, momentum, optimizer, first, parameter);
  parameter.copy_(sgd_step_out_of_place(parameter, gradient, momentum, optimizer, first));
}

stage_trainer::stage_trainer(layered_model layers, optimizer_spec optimizer, stash_mode mode)
  : layers_(std::move(layers)), optimizer_(optimizer), mode_(mode) {
  layers_.set_trainable(true);
  layers_.train(true);
  parameters_ = layers_.parameters();
  std::vector<at::Tensor> data;
  for (const auto& p : parameters_) {
    momentum_.push_back(torch::zeros_like(p));
    data.push_back(p.detach());
  }
  versions_[0] = {std::move(data), 0};
}

at::Tensor stage_trainer::forward(int64_t id, const at::Tensor& input, bool first_stage,
                                  int64_t version) {
  if (stash_.count(id) != 0)
    throw error("stage forward: microbatch " + std::to_string(id) + " is already in flight");
  if (version < 0)
    version = version_;
  if (!holds(version))
    throw error("stage forward: microbatch " + std::to_string(id) + " asks for weight version " +
                std::to_string(version) + ", which this stage no longer holds (current " +
                std::to_string(version_) + ")");
  stashed s;
  s.input = input;
  s.first_stage = first_stage;
  s.version = version;
  s.leaf = first_stage ? input : input.detach().requires_grad_(true);
  if (version != version_)
    use_parameters(versions_.at(version).parameters);
  {
    torch::AutoGradMode grad{mode_ == stash_mode::stash};
    s.output = layers_.forward(s.leaf);
  }
  if (version != version_)
    use_parameters(versions_.at(version_).parameters);
  auto out = s.output.detach();
  versions_[version].users += 1;
  stash_.emplace(id, std::move(s));
  return out;
}

void stage_trainer::retain_from(int64_t v) {
  if (retain_from_ != INT64_MAX && v < retain_from_)
    throw error("stage: vertical sync asked for version " + std::to_string(v) + " after " +
                std::to_string(retain_from_) + " (versions must not go back)");
  retain_from_ = v;
  for (auto it = versions_.begin(); it != versions_.end();) {
    auto next = std::next(it);
    drop_unused(it->first);
    it = next;
  }
}

at::Tensor stage_trainer::infer(const at::Tensor& input) {
  torch::NoGradGuard no_grad;
  evaluation_scope evaluation(layers_);
  return layers_.forward(input);
}

backward_result stage_trainer::backward(int64_t id, const at::Tensor& output_gradient) {
  return run_backward(id, &output_gradient, nullptr, 1);
}

backward_result stage_trainer::backward_loss(int64_t id, const at::Tensor& labels,
                                             int32_t scale) {
  return run_backward(id, nullptr, &labels, scale);
}

backward_result stage_trainer::run_backward(int64_t id, const at::Tensor* output_gradient,
                                            const at::Tensor* labels, int32_t scale) {
  auto it = stash_.find(id);
  if (it == stash_.end())
    throw error("stage backward: microbatch " + std::to_string(id) + " is not in flight");
  auto s = std::move(it->second);
  stash_.erase(it);
  backward_result result;
  result.forward_version = s.version;
  // Until the backward is done (see buffers_kept).
  std::optional<buffers_kept> running_statistics;
  if (mode_ == stash_mode::stash) {
    // The graph was built with version s.version: make the parameters that
    // version again for the duration of the backward.
    use_parameters(versions_.at(s.version).parameters);
    result.backward_version = s.version;
  } else {
    // No stash: recompute the forward with the weights of now. The forward
    // of `id` already updated the running statistics; a second update would
    // count the microbatch twice.
    running_statistics.emplace(layers_);
    s.leaf = s.first_stage ? s.input : s.input.detach().requires_grad_(true);
    s.output = layers_.forward(s.leaf);
    result.backward_version = version_;
  }
  if (labels != nullptr) {
    auto loss = torch::nn::functional::cross_entropy(s.output, *labels);
    result.loss = loss.item<double>();
    watch_.check(result.loss, layers_, s.input); // with the weights of its forward
    if (loss.requires_grad())
      (loss / scale).backward();
  } else if (s.output.requires_grad()) {
    // A first stage with nothing to train (a Flatten, or every layer
    // frozen) built no graph: there is nothing to propagate into.
    s.output.backward(*output_gradient);
  }
  if (!s.first_stage)
    result.input_gradient = s.leaf.grad();
  if (mode_ == stash_mode::stash)
    use_parameters(versions_.at(version_).parameters);
  release(s.version);
  return result;
}

void stage_trainer::use_parameters(const std::vector<at::Tensor>& data) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i].set_data(data[i]);
}

void stage_trainer::release(int64_t version) {
  versions_.at(version).users -= 1;
  drop_unused(version);
}

/// Drops `version` unless it is current, used, or kept for vertical sync.
void stage_trainer::drop_unused(int64_t version) {
  auto it = versions_.find(version);
  if (it != versions_.end() && it->second.users == 0 && version != version_ &&
      version < retain_from_)
    versions_.erase(it);
}

std::vector<at::Tensor> stage_trainer::take_gradients() {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (auto& p : parameters_) {
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    if (p.grad().defined())
      p.mutable_grad().zero_();
  }
  return out;
}

void stage_trainer::step() {
  std::vector<at::Tensor> accumulated;
  for (const auto& p : parameters_)
    accumulated.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  step(accumulated);
}

void stage_trainer::step(const std::vector<at::Tensor>& gradients) {
  if (gradients.size() != parameters_.size())
    throw error("stage step: " + std::to_string(gradients.size()) + " gradients for " +
                std::to_string(parameters_.size()) + " parameters");
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (!gradients[i].sizes().equals(parameters_[i].sizes()) ||
        gradients[i].scalar_type() != parameters_[i].scalar_type())
      throw error("stage step: gradient " + std::to_string(i) +
                  " does not match its parameter's shape and type");
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> next;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    next.push_back(
      sgd_step_out_of_place(p.detach(), gradients[i], momentum_[i], optimizer_, version_ == 0));
    if (p.grad().defined())
      p.mutable_grad().zero_();
  }
  auto previous = version_++;
  versions_[version_] = {next, 0};
  use_parameters(next);
  drop_unused(previous);
}

training_state stage_trainer::save_state() const {
  if (!stash_.empty())
    throw error("stage checkpoint: " + std::to_string(stash_.size()) +
                " microbatches are in flight (checkpoints are taken between minibatches)");
  training_state s;
  s.version = version_;
  s.tensors = layers_.named_state();
  auto names = layers_.named_parameters();
  for (size_t i = 0; i < names.size(); ++i)
    s.tensors.emplace_back("momentum." + names[i].first, momentum_[i]);
  for (auto& t : s.tensors)
    t.second = t.second.detach().clone();
  return s;
}

void stage_trainer::restore(const training_state& s) {
  if (!stash_.empty())
    throw error("stage restore: microbatches are in flight");
  auto names = layers_.named_parameters();
  auto buffers = layers_.named_buffers();
  // Check everything first: a checkpoint that does not fit changes nothing.
  std::vector<at::Tensor> weights, momenta, buffer_values;
  for (const auto& [name, p] : names) {
    weights.push_back(s.matching(name, p).clone());
    momenta.push_back(s.matching("momentum." + name, p).clone());
  }
  for (const auto& [name, b] : buffers)
    buffer_values.push_back(s.matching(name, b));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].second.copy_(buffer_values[i]);
  for (auto& p : parameters_)
    if (p.grad().defined())
      p.mutable_grad().zero_();
  momentum_ = std::move(momenta);
  version_ = s.version;
  versions_.clear();
  versions_[version_] = {weights, 0};
  use_parameters(weights);
}

} // namespace baton::model
