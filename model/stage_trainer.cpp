#include "model/stage_trainer.hpp"

#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::model {

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

at::Tensor stage_trainer::forward(int64_t id, const at::Tensor& input, bool first_stage) {
  if (stash_.count(id) != 0)
    throw error("stage forward: microbatch " + std::to_string(id) + " is already in flight");
  stashed s;
  s.input = input;
  s.first_stage = first_stage;
  s.version = version_;
  s.leaf = first_stage ? input : input.detach().requires_grad_(true);
  {
    torch::AutoGradMode grad{mode_ == stash_mode::stash};
    s.output = layers_.forward(s.leaf);
  }
  auto out = s.output.detach();
  versions_[version_].users += 1;
  stash_.emplace(id, std::move(s));
  return out;
}

at::Tensor stage_trainer::infer(const at::Tensor& input) const {
  torch::NoGradGuard no_grad;
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
  if (mode_ == stash_mode::stash) {
    // The graph was built with version s.version: make the parameters that
    // version again for the duration of the backward.
    use_parameters(versions_.at(s.version).parameters);
    result.backward_version = s.version;
  } else {
    // No stash: recompute the forward with the weights of now.
    s.leaf = s.first_stage ? s.input : s.input.detach().requires_grad_(true);
    s.output = layers_.forward(s.leaf);
    result.backward_version = version_;
  }
  if (labels != nullptr) {
    auto loss = torch::nn::functional::cross_entropy(s.output, *labels);
    result.loss = loss.item<double>();
    (loss / scale).backward();
  } else {
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
  auto& entry = versions_.at(version);
  entry.users -= 1;
  if (entry.users == 0 && version != version_)
    versions_.erase(version);
}

void stage_trainer::step() {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> next;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    auto grad = p.grad().defined() ? p.grad() : torch::zeros_like(p);
    if (optimizer_.weight_decay != 0)
      grad = grad + optimizer_.weight_decay * p.detach();
    // Same arithmetic as torch::optim::SGD (momentum buffer starts as the
    // first gradient), but out of place: version v's tensors stay intact.
    momentum_[i] = version_ == 0 && optimizer_.momentum != 0
                     ? grad.clone()
                     : momentum_[i] * optimizer_.momentum + grad;
    auto update = optimizer_.momentum != 0 ? momentum_[i] : grad;
    next.push_back(p.detach() - optimizer_.lr * update);
    if (p.grad().defined())
      p.mutable_grad().zero_();
  }
  auto previous = version_++;
  versions_[version_] = {next, 0};
  use_parameters(next);
  if (versions_.at(previous).users == 0)
    versions_.erase(previous);
}

} // namespace baton::model
