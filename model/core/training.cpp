#include "model/core/training.hpp"

#include <torch/torch.h>

#include "model/core/error.hpp"

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
    : model_(std::move(head)), task_(std::move(t)),
      watch_("the head of task '" + task_.name + "'") {
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
  const double value = loss.item<double>();
  watch_.check(value, model_, features); // before the step: the weights that made it
  // Scaling each microbatch's mean loss by 1/step_size makes the accumulated
  // gradient the gradient of the minibatch's mean loss (equal microbatches).
  (loss / static_cast<double>(step_size)).backward();
  if (last_in_step) {
    optimizer_->sgd.step();
    optimizer_->sgd.zero_grad();
    ++version_;
  }
  return value;
}

namespace {

std::string momentum_key(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

} // namespace

training_state head_trainer::save_state() const {
  training_state s;
  s.version = version_;
  s.tensors = model_.named_state();
  const auto& sgd_state = optimizer_->sgd.state();
  for (const auto& [name, p] : model_.named_parameters()) {
    auto it = sgd_state.find(momentum_key(p));
    if (it != sgd_state.end())
      s.tensors.emplace_back(
        "momentum." + name,
        static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer());
  }
  for (auto& t : s.tensors)
    t.second = t.second.detach().clone();
  return s;
}

void head_trainer::restore(const training_state& s) {
  // Check everything first: a checkpoint that does not fit changes nothing.
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : model_.named_state())
    values.push_back(s.matching(name, t));
  std::vector<std::pair<at::Tensor, at::Tensor>> momenta; // parameter, buffer
  const auto& options = static_cast<const torch::optim::SGDOptions&>(optimizer_->sgd.defaults());
  if (options.momentum() != 0)
    for (const auto& [name, p] : model_.named_parameters())
      momenta.emplace_back(p, s.matching("momentum." + name, p));
  torch::NoGradGuard no_grad;
  auto state = model_.state();
  for (size_t i = 0; i < state.size(); ++i)
    state[i].copy_(values[i]);
  auto& sgd_state = optimizer_->sgd.state();
  for (const auto& [p, buffer] : momenta) {
    auto param_state = std::make_unique<torch::optim::SGDParamState>();
    param_state->momentum_buffer(buffer.clone());
    sgd_state[momentum_key(p)] = std::move(param_state);
  }
  version_ = s.version;
}

int64_t head_trainer::correct(const at::Tensor& features, const at::Tensor& task_labels) {
  torch::NoGradGuard no_grad;
  model_.train(false);
  auto predicted = model_.forward(features).argmax(1);
  return predicted.eq(task_labels).sum().item<int64_t>();
}

} // namespace baton::model
