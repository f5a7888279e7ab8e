#include "model/core/stage_trainer.hpp"

#include <algorithm>
#include <optional>
#include <utility>

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

stage_trainer::stage_trainer(layered_model layers, optimizer_spec optimizer, stash_mode mode)
  : layers_(std::move(layers)), optimizer_(optimizer), mode_(mode) {
  layers_.set_trainable(true);
  layers_.train(true);
  parameters_ = layers_.parameters();
  std::vector<at::Tensor> data;
  check_optimizer(optimizer_);
  for (const auto& p : parameters_) {
    state_.push_back(make_parameter_state(p, optimizer_));
    frozen_.push_back(!p.requires_grad());
    data.push_back(p.detach());
  }
  versions_[0] = {std::move(data), 0};
}

std::shared_ptr<torch::nn::Conv2dImpl> boundary_convolution(const named_layer& layer,
                                                            std::string* why) {
  auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(layer.module.ptr());
  std::string reason;
  if (!conv)
    reason = "layer '" + layer.name + "' is not a convolution (the next stage computes a "
             "Conv2d's weight gradient only)";
  else if (!c10::get_if<torch::ExpandingArray<2>>(&conv->options.padding()) ||
           !c10::get_if<torch::enumtype::kZeros>(&conv->options.padding_mode()))
    reason = "convolution '" + layer.name + "' pads other than with zeros of given sizes";
  if (reason.empty())
    return conv;
  if (why != nullptr)
    *why = reason;
  return nullptr;
}

std::vector<at::Tensor> convolution_weight_gradients(const torch::nn::Conv2dImpl& conv,
                                                     const at::Tensor& input,
                                                     const at::Tensor& output_gradient) {
  torch::NoGradGuard no_grad;
  const auto& o = conv.options;
  const bool bias = conv.bias.defined();
  const auto& padding = *c10::get_if<torch::ExpandingArray<2>>(&o.padding());
  std::vector<int64_t> bias_sizes;
  if (bias)
    bias_sizes = conv.bias.sizes().vec();
  auto [ignored, weight, bias_gradient] = at::convolution_backward(
    output_gradient, input, conv.weight,
    bias ? c10::optional<at::IntArrayRef>(bias_sizes) : c10::nullopt, *o.stride(), *padding,
    *o.dilation(), /*transposed=*/false, /*output_padding=*/{0, 0}, o.groups(),
    {false, true, bias});
  std::vector<at::Tensor> out{weight};
  if (bias)
    out.push_back(bias_gradient);
  return out;
}

namespace {

/// boundary_convolution, or a model::error saying why not.
std::shared_ptr<torch::nn::Conv2dImpl> required_convolution(const named_layer& layer) {
  std::string why;
  auto conv = boundary_convolution(layer, &why);
  if (!conv)
    throw error("weight_gradient: next: " + why);
  return conv;
}

} // namespace

void stage_trainer::hand_on_weight_gradient() {
  if (layers_.size() == 0)
    throw error("weight_gradient: next: the stage has no layers");
  const size_t last = layers_.size() - 1;
  required_convolution(layers_.layers()[last]);
  const auto table = layers_.parameter_table();
  last_parameters_.clear();
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].layer != last && std::find(table[i].tied_layers.begin(),
                                            table[i].tied_layers.end(),
                                            last) == table[i].tied_layers.end())
      continue;
    if (table[i].layer != last || !table[i].tied_layers.empty())
      throw error("weight_gradient: next: parameter '" + table[i].name +
                  "' of the last layer is tied to another layer");
    last_parameters_.push_back(i);
  }
  if (last_parameters_.empty())
    throw error("weight_gradient: next: layer '" + layers_.layers()[last].name +
                "' has no parameters");
  for (size_t i : last_parameters_)
    parameters_[i].requires_grad_(false); // its backward computes the input half only
  handing_on_.emplace(layers_.slice(0, last), layers_.slice(last, last + 1));
}

void stage_trainer::take_weight_gradient(const named_layer& previous) {
  taking_ = required_convolution(previous);
}

at::Tensor stage_trainer::run_forward(const at::Tensor& leaf, boundary_io* boundary) {
  if (!handing_on_)
    return layers_.forward(leaf);
  auto last_input = handing_on_->first.forward(leaf);
  boundary->last_input = last_input.detach();
  return handing_on_->second.forward(last_input);
}

at::Tensor stage_trainer::forward(int64_t id, const at::Tensor& input, bool first_stage,
                                  int64_t version, boundary_io* boundary) {
  if (stash_.count(id) != 0)
    throw error("stage forward: microbatch " + std::to_string(id) + " is already in flight");
  if (version < 0)
    version = version_;
  if (!holds(version))
    throw error("stage forward: microbatch " + std::to_string(id) + " asks for weight version " +
                std::to_string(version) + ", which this stage no longer holds (current " +
                std::to_string(version_) + ")");
  if ((handing_on_ || taking_) && boundary == nullptr)
    throw error("stage forward: microbatch " + std::to_string(id) +
                " without the tensors of its boundary's weight gradient");
  stashed s;
  if (taking_) {
    const auto& previous = boundary->previous_input;
    if (!previous.defined() || previous.dim() != 4 || input.dim() == 0 ||
        previous.size(0) != input.size(0))
      throw error("stage forward: microbatch " + std::to_string(id) +
                  " came without the input of the previous stage's last layer for its rows");
    s.previous_input = previous;
  }
  s.input = input;
  s.first_stage = first_stage;
  s.version = version;
  s.leaf = first_stage ? input : input.detach().requires_grad_(true);
  if (version != version_)
    use_parameters(versions_.at(version).parameters);
  {
    torch::AutoGradMode grad{mode_ == stash_mode::stash};
    s.output = run_forward(s.leaf, boundary);
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

std::vector<at::Tensor> stage_trainer::previous_weight_gradients(const backward_result& r) const {
  if (!taking_)
    throw error("stage backward: this stage takes no weight gradient of the previous one");
  return convolution_weight_gradients(*taking_, r.previous_input, r.input_gradient);
}

void stage_trainer::add_last_weight_gradients(const std::vector<at::Tensor>& gradients) {
  if (weight_gradients_missing_ == 0)
    throw error("stage backward: weight gradients of the last layer for no backward");
  if (gradients.size() != last_parameters_.size())
    throw error("stage backward: " + std::to_string(gradients.size()) +
                " weight gradients of the last layer for its " +
                std::to_string(last_parameters_.size()) + " parameters");
  for (size_t k = 0; k < gradients.size(); ++k) {
    const auto& p = parameters_[last_parameters_[k]];
    if (!gradients[k].defined() || !gradients[k].sizes().equals(p.sizes()) ||
        gradients[k].scalar_type() != p.scalar_type())
      throw error("stage backward: weight gradient " + std::to_string(k) +
                  " of the last layer does not match its parameter's shape and type");
  }
  torch::NoGradGuard no_grad;
  // As autograd's AccumulateGrad: the first gradient is taken (a copy: the
  // message may be shared), the next ones added in place.
  for (size_t k = 0; k < gradients.size(); ++k) {
    auto& grad = parameters_[last_parameters_[k]].mutable_grad();
    if (grad.defined())
      grad.add_(gradients[k]);
    else
      grad = gradients[k].detach().clone();
  }
  weight_gradients_missing_ -= 1;
}

void stage_trainer::check_no_weight_gradient_missing(const char* what) const {
  if (weight_gradients_missing_ > 0)
    throw error(std::string{what} + ": the last layer's weight gradients of " +
                std::to_string(weight_gradients_missing_) + " backward(s) are missing");
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
    boundary_io ignored;
    s.output = run_forward(s.leaf, &ignored);
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
  result.previous_input = std::move(s.previous_input);
  if (handing_on_)
    weight_gradients_missing_ += 1;
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
  check_no_weight_gradient_missing("stage gradients");
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (auto& p : parameters_)
    out.push_back(p.grad().defined() ? std::exchange(p.mutable_grad(), at::Tensor())
                                     : torch::zeros_like(p));
  return out;
}

void stage_trainer::step() {
  check_no_weight_gradient_missing("stage step");
  std::vector<at::Tensor> accumulated;
  for (const auto& p : parameters_)
    accumulated.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  step(accumulated);
  clear_gradients(parameters_);
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
  double lr = optimizer_.lr;
  if (steps_per_epoch_ > 0)
    lr = lr_at(optimizer_, version_, steps_per_epoch_, epochs_);
  else if (optimizer_.scheduled())
    throw error("stage step: the optimizer's schedule needs the run's length (set_schedule)");
  const auto clipped = clip_grad_norm(gradients, optimizer_.clip_grad_norm);
  // The current version's tensors are stepped in place when nothing will
  // read them again (no microbatch in flight used them, vertical sync keeps
  // no older version): a pass reading and writing the same memory instead
  // of a new buffer written beside them, the same arithmetic.
  auto& current = versions_.at(version_);
  std::vector<at::Tensor> next;
  if (current.users == 0 && version_ < retain_from_) {
    next = current.parameters;
    for (size_t i = 0; i < next.size(); ++i)
      if (!frozen_[i])
        optimizer_step_in_place(next[i], clipped[i], state_[i], optimizer_, lr);
  } else {
    // A frozen tensor is shared by the versions: nothing steps it in place.
    for (size_t i = 0; i < parameters_.size(); ++i)
      next.push_back(frozen_[i] ? parameters_[i].detach()
                                : optimizer_step_out_of_place(parameters_[i].detach(), clipped[i],
                                                              state_[i], optimizer_, lr));
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
  for (size_t i = 0; i < names.size(); ++i) {
    s.tensors.emplace_back("momentum." + names[i].first, state_[i].first);
    if (state_[i].second.defined())
      s.tensors.emplace_back("second." + names[i].first, state_[i].second);
  }
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
  std::vector<at::Tensor> weights, buffer_values;
  std::vector<parameter_state> states;
  for (const auto& [name, p] : names) {
    weights.push_back(s.matching(name, p).clone());
    parameter_state state;
    state.first = s.matching("momentum." + name, p).clone();
    if (has_second_moment(optimizer_))
      state.second = s.matching("second." + name, p).clone();
    state.steps = s.version;
    states.push_back(std::move(state));
  }
  for (const auto& [name, b] : buffers)
    buffer_values.push_back(s.matching(name, b));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].second.copy_(buffer_values[i]);
  clear_gradients(parameters_);
  weight_gradients_missing_ = 0;
  state_ = std::move(states);
  version_ = s.version;
  versions_.clear();
  versions_[version_] = {weights, 0};
  use_parameters(weights);
}

} // namespace baton::model
