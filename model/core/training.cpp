#include "model/core/training.hpp"

#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/optimizer.hpp"

namespace baton::model {

at::Tensor forward_frozen(const layered_model& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  return m.forward(x);
}

// SGD steps with torch::optim::SGD, as heads always did (its ATen kernels'
// rounding, which the fused SGD of stage_trainer may differ from in the last
// bit); adam and adamw with optimizer.hpp's steps, which equal torch.optim's.
struct head_trainer::optimizer_state {
  explicit optimizer_state(const layered_model& m, const optimizer_spec& opt)
      : spec(opt), parameters(m.parameters()),
        sgd(m.parameters(), torch::optim::SGDOptions(opt.lr)
                              .momentum(opt.momentum)
                              .nesterov(opt.nesterov)
                              .weight_decay(opt.weight_decay)) {
    if (has_second_moment(opt))
      for (const auto& p : parameters)
        adam.push_back(make_parameter_state(p, opt));
  }
  optimizer_spec spec;
  std::vector<at::Tensor> parameters;
  torch::optim::SGD sgd;
  std::vector<parameter_state> adam; ///< adam, adamw: per parameter
  int64_t steps_per_epoch = 0;
  int64_t epochs = 0;

  void step(int64_t version) {
    double lr = spec.lr;
    if (steps_per_epoch > 0)
      lr = lr_at(spec, version, steps_per_epoch, epochs);
    else if (spec.scheduled())
      throw error("head step: the optimizer's schedule needs the run's length (set_schedule)");
    torch::NoGradGuard no_grad;
    if (spec.clip_grad_norm > 0) {
      std::vector<at::Tensor> grads;
      for (const auto& p : parameters)
        grads.push_back(p.grad());
      const auto clipped = clip_grad_norm(grads, spec.clip_grad_norm);
      for (size_t i = 0; i < parameters.size(); ++i)
        if (clipped[i].defined())
          parameters[i].mutable_grad().copy_(clipped[i]);
    }
    if (adam.empty()) {
      static_cast<torch::optim::SGDOptions&>(sgd.param_groups().front().options()).lr(lr);
      sgd.step();
      clear_gradients(parameters);
      return;
    }
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!parameters[i].grad().defined())
        continue;
      auto p = parameters[i].detach();
      optimizer_step_in_place(p, parameters[i].grad(), adam[i], spec, lr);
    }
    clear_gradients(parameters);
  }
};

head_trainer::head_trainer(layered_model head, task t, optimizer_spec opt)
    : model_(std::move(head)), task_(std::move(t)),
      watch_("the head of task '" + task_.name + "'") {
  try {
    check_optimizer(opt);
  } catch (const error& e) {
    throw error("head '" + task_.name + "': " + e.what());
  }
  model_.set_trainable(true);
  optimizer_ = std::make_unique<optimizer_state>(model_, opt);
}

void head_trainer::set_schedule(int64_t steps_per_epoch, int64_t epochs) {
  optimizer_->steps_per_epoch = steps_per_epoch;
  optimizer_->epochs = epochs;
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
    optimizer_->step(version_);
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
  const auto named = model_.named_parameters();
  for (size_t i = 0; i < optimizer_->adam.size(); ++i) {
    s.tensors.emplace_back("momentum." + named[i].first, optimizer_->adam[i].first);
    s.tensors.emplace_back("second." + named[i].first, optimizer_->adam[i].second);
  }
  for (const auto& [name, p] : named) {
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
  std::vector<parameter_state> adam;
  const auto named = model_.named_parameters();
  for (size_t i = 0; i < optimizer_->adam.size(); ++i)
    adam.push_back({s.matching("momentum." + named[i].first, named[i].second).clone(),
                    s.matching("second." + named[i].first, named[i].second).clone(), s.version});
  const auto& options = static_cast<const torch::optim::SGDOptions&>(optimizer_->sgd.defaults());
  if (optimizer_->adam.empty() && options.momentum() != 0)
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
  if (!adam.empty())
    optimizer_->adam = std::move(adam);
  version_ = s.version;
}

int64_t head_trainer::correct(const at::Tensor& features, const at::Tensor& task_labels) {
  torch::NoGradGuard no_grad;
  model_.train(false);
  auto predicted = model_.forward(features).argmax(1);
  return predicted.eq(task_labels).sum().item<int64_t>();
}

} // namespace baton::model
