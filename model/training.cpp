#include "model/training.hpp"

#include <torch/torch.h>

#include "model/error.hpp"

namespace baton::model {

at::Tensor forward_frozen(const layered_model& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  return m.forward(x);
}

struct head_trainer::optimizer_state {
  explicit optimizer_state(const layered_model& m, const optimizer_spec& opt)
      : sgd(m.parameters(), torch::optim::SGDOptions(opt.lr)
                                .momentum(opt.momentum)
                                .weight_decay(opt.weight_decay)) {}
  torch::optim::SGD sgd;
};

head_trainer::head_trainer(layered_model head, task t, optimizer_spec opt)
    : model_(std::move(head)), task_(std::move(t)) {
  if (opt.lr <= 0 || opt.momentum < 0 || opt.weight_decay < 0)
    throw error("head '" + task_.name + "': expected lr > 0, momentum >= 0, weight_decay >= 0");
  model_.set_trainable(true);
  optimizer_ = std::make_unique<optimizer_state>(model_, opt);
}

head_trainer::~head_trainer() = default;

double head_trainer::train(const at::Tensor& features, const at::Tensor& task_labels,
                           int32_t step_size, bool last_in_step) {
  TORCH_CHECK(step_size > 0, "head_trainer::train: step_size must be positive, got ",
              step_size);
  model_.train(true);
  auto logits = model_.forward(features);
  auto loss = torch::nn::functional::cross_entropy(logits, task_labels);
  // Scaling each microbatch's mean loss by 1/step_size makes the accumulated
  // gradient the gradient of the minibatch's mean loss (equal microbatches).
  (loss / static_cast<double>(step_size)).backward();
  if (last_in_step) {
    optimizer_->sgd.step();
    optimizer_->sgd.zero_grad();
    ++version_;
  }
  return loss.item<double>();
}

int64_t head_trainer::correct(const at::Tensor& features, const at::Tensor& task_labels) {
  torch::NoGradGuard no_grad;
  model_.train(false);
  auto predicted = model_.forward(features).argmax(1);
  return predicted.eq(task_labels).sum().item<int64_t>();
}

} // namespace baton::model
