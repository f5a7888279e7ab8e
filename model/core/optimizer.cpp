#include "model/core/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/vectorised.hpp"

namespace baton::model {

void check_optimizer(const optimizer_spec& o) {
  auto fail = [](const std::string& what) { throw error("optimizer: " + what); };
  if (std::find(optimizer_names().begin(), optimizer_names().end(), o.name) ==
      optimizer_names().end())
    fail("unknown name '" + o.name + "' (expected sgd, adam or adamw)");
  if (std::find(schedule_names().begin(), schedule_names().end(), o.schedule) ==
      schedule_names().end())
    fail("unknown schedule '" + o.schedule + "' (expected constant, step or cosine)");
  if (!(o.lr > 0))
    fail("expected lr > 0");
  if (!(o.momentum >= 0 && o.momentum < 1))
    fail("expected momentum in [0, 1)");
  if (o.nesterov && (o.name != "sgd" || o.momentum == 0))
    fail("nesterov needs sgd with momentum > 0");
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
    fail("expected betas in [0, 1)");
  if (!(o.eps > 0))
    fail("expected eps > 0");
  if (!(o.weight_decay >= 0) || !(o.clip_grad_norm >= 0) || !(o.warmup_epochs >= 0) ||
      !(o.min_lr >= 0))
    fail("expected weight_decay, clip_grad_norm, warmup_epochs and min_lr >= 0");
  if (!(o.step_epochs > 0) || !(o.gamma > 0))
    fail("expected step_epochs > 0 and gamma > 0");
}

parameter_state make_parameter_state(const at::Tensor& like, const optimizer_spec& optimizer) {
  parameter_state s;
  s.first = torch::zeros_like(like);
  if (has_second_moment(optimizer))
    s.second = torch::zeros_like(like);
  return s;
}

// -- SGD -------------------------------------------------------------------------

namespace {

/// Whether the fused step applies: three contiguous float32 tensors of one
/// shape, the state not sharing the others' memory (it is written).
bool fusable(const at::Tensor& parameter, const at::Tensor& gradient,
             std::initializer_list<const at::Tensor*> state) {
  for (const auto* t : {&parameter, &gradient})
    if (!t->defined() || t->scalar_type() != at::kFloat || !t->is_contiguous())
      return false;
  if (!gradient.sizes().equals(parameter.sizes()))
    return false;
  for (const auto* t : state)
    if (!t->defined() || t->scalar_type() != at::kFloat || !t->is_contiguous() ||
        !t->sizes().equals(parameter.sizes()) || t->data_ptr() == parameter.data_ptr() ||
        t->data_ptr() == gradient.data_ptr())
      return false;
  return true;
}

/// What SGD's pass needs besides the gradient: the weights it reads (p),
/// the momentum it updates (m), where the new weights go (n; `p` itself in
/// place) and the step's scalars.
struct sgd_pass {
  const float* p;
  float* m;
  float* n;
  float lr, mu, decay;
  bool first; ///< the momentum buffer starts as the gradient
};

/// torch::optim::SGD's operations (no Nesterov) on elements [begin, end),
/// element i's gradient gradient_of(i). One loop per case of momentum, no
/// store under a condition, and no pointer pair checked for overlap
/// (element i reads and writes element i only: ivdep), so that GCC
/// vectorises it: with the momentum's store under `if (mu != 0)` the loop
/// stayed scalar, about twice the time memory allows (perf, the mlp's 20 M
/// weights); at -O2 only with BATON_VECTORISED. The same operations per
/// element either way.
template <class Gradient>
BATON_VECTORISED
void sgd_elements(const sgd_pass& s, Gradient gradient_of, int64_t begin, int64_t end) {
  const float* p = s.p;
  float* m = s.m;
  float* n = s.n;
  const float lr = s.lr, mu = s.mu, decay = s.decay;
  const bool first = s.first;
  if (mu == 0) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const float g = gradient_of(i);
      n[i] = p[i] - lr * (decay != 0 ? g + decay * p[i] : g);
    }
    return;
  }
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    const float g = gradient_of(i);
    const float grad = decay != 0 ? g + decay * p[i] : g;
    m[i] = first ? grad : m[i] * mu + grad;
    n[i] = p[i] - lr * m[i];
  }
}

sgd_pass pass_of(const at::Tensor& parameter, at::Tensor& momentum, at::Tensor& next,
                 const optimizer_spec& optimizer, double lr, bool first) {
  return {parameter.data_ptr<float>(),
          momentum.data_ptr<float>(),
          next.data_ptr<float>(),
          static_cast<float>(lr),
          static_cast<float>(optimizer.momentum),
          static_cast<float>(optimizer.weight_decay),
          first};
}

/// The step in one pass over the elements (the ATen version below takes
/// four, each allocating: resnet18's layer4 stepped in 28 ms that way and in
/// 11 ms this way, memory-bound), into `next` (`parameter` itself for a
/// step in place: each element is read before it is written). Same
/// operations in the same order per element.
void fused_sgd_step(const at::Tensor& parameter, const at::Tensor& gradient,
                    at::Tensor& momentum, const optimizer_spec& optimizer, bool first,
                    at::Tensor& next) {
  const auto pass = pass_of(parameter, momentum, next, optimizer, optimizer.lr, first);
  const float* g = gradient.data_ptr<float>();
  at::parallel_for(0, parameter.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    sgd_elements(pass, [g](int64_t i) { return g[i]; }, begin, end);
  });
}

} // namespace

at::Tensor sgd_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                 at::Tensor& momentum, const optimizer_spec& optimizer,
                                 bool first) {
  torch::NoGradGuard no_grad;
  if (!optimizer.nesterov && fusable(parameter, gradient, {&momentum})) {
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
  auto update = optimizer.momentum == 0 ? grad
                : optimizer.nesterov    ? grad + optimizer.momentum * momentum
                                        : momentum;
  return parameter - optimizer.lr * update;
}

void sgd_step_in_place(at::Tensor& parameter, const at::Tensor& gradient, at::Tensor& momentum,
                       const optimizer_spec& optimizer, bool first) {
  torch::NoGradGuard no_grad;
  if (!optimizer.nesterov && fusable(parameter, gradient, {&momentum}) &&
      gradient.data_ptr() != parameter.data_ptr())
    return fused_sgd_step(parameter, gradient, momentum, optimizer, first, parameter);
  parameter.copy_(sgd_step_out_of_place(parameter, gradient, momentum, optimizer, first));
}

bool sgd_step_of_mean_in_place(at::Tensor& parameter, const std::vector<mean_piece>& pieces,
                               int32_t workers, parameter_state& state,
                               const optimizer_spec& optimizer, double lr, at::Tensor* next) {
  auto& momentum = state.first;
  at::Tensor& into = next != nullptr ? *next : parameter;
  auto fits = [&](const at::Tensor& t) {
    return t.defined() && t.scalar_type() == at::kFloat && t.is_contiguous();
  };
  if (optimizer.name != "sgd" || optimizer.nesterov || workers < 1 || !fits(parameter) ||
      !fits(momentum) || !momentum.sizes().equals(parameter.sizes()) ||
      momentum.data_ptr() == parameter.data_ptr() || !fits(into) ||
      !into.sizes().equals(parameter.sizes()) || into.data_ptr() == momentum.data_ptr())
    return false;
  int64_t covered = 0;
  for (const auto& piece : pieces) {
    if (!fits(piece.a) || !fits(piece.b) || piece.b.numel() != piece.a.numel())
      return false;
    if (piece.offset < 0 || piece.offset + piece.a.numel() > parameter.numel())
      return false;
    covered += piece.a.numel();
  }
  if (covered != parameter.numel())
    return false;
  torch::NoGradGuard no_grad;
  // fused_sgd_step's operations per element, its gradient read as the mean.
  const auto whole = pass_of(parameter, momentum, into, optimizer, lr, state.steps == 0);
  const auto w = static_cast<float>(workers);
  for (const auto& piece : pieces) {
    auto pass = whole;
    pass.p += piece.offset;
    pass.m += piece.offset;
    pass.n += piece.offset;
    const float* a = piece.a.data_ptr<float>();
    const float* b = piece.b.data_ptr<float>();
    at::parallel_for(0, piece.a.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      sgd_elements(pass, [a, b, w](int64_t i) { return (a[i] + b[i]) / w; }, begin, end);
    });
  }
  state.steps += 1;
  return true;
}

// -- Adam, AdamW -------------------------------------------------------------------

namespace {

/// The scalars of one Adam step, as torch.optim 1.13's _single_tensor_adam(w)
/// computes them in Python (double), each cast to float where a kernel
/// takes it.
struct adam_scalars {
  float decay_factor = 1; ///< adamw: 1 - lr x weight_decay
  float l2 = 0;           ///< adam: weight_decay, added to the gradient
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bias_correction2_sqrt, eps, minus_step_size;
};

adam_scalars scalars_of(const optimizer_spec& o, double lr, int64_t step) {
  adam_scalars s;
  if (o.name == "adamw")
    s.decay_factor = static_cast<float>(1 - lr * o.weight_decay);
  else
    s.l2 = static_cast<float>(o.weight_decay);
  s.beta1 = static_cast<float>(o.beta1);
  s.one_minus_beta1 = static_cast<float>(1 - o.beta1);
  s.beta2 = static_cast<float>(o.beta2);
  s.one_minus_beta2 = static_cast<float>(1 - o.beta2);
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.eps = static_cast<float>(o.eps);
  s.minus_step_size = static_cast<float>(-(lr / bias_correction1));
  return s;
}

/// The step in one pass over the elements, into `next` (`parameter` itself
/// in place: each element is read before it is written), torch's kernels'
/// operations in their order per element.
void fused_adam_step(const at::Tensor& parameter, const at::Tensor& gradient,
                     parameter_state& state, const adam_scalars& c, at::Tensor& next) {
  const float* p = parameter.data_ptr<float>();
  const float* g = gradient.data_ptr<float>();
  float* m = state.first.data_ptr<float>();
  float* v = state.second.data_ptr<float>();
  float* n = next.data_ptr<float>();
  at::parallel_for(0, parameter.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float value = c.decay_factor != 1 ? p[i] * c.decay_factor : p[i];
      const float grad = c.l2 != 0 ? g[i] + c.l2 * p[i] : g[i];
      m[i] = m[i] * c.beta1 + c.one_minus_beta1 * grad;
      v[i] = v[i] * c.beta2 + c.one_minus_beta2 * grad * grad;
      const float denom = std::sqrt(v[i]) / c.bias_correction2_sqrt + c.eps;
      n[i] = value + c.minus_step_size * (m[i] / denom);
    }
  });
}

at::Tensor adam_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                  parameter_state& state, const optimizer_spec& o, double lr) {
  if (!state.second.defined())
    state.second = torch::zeros_like(parameter);
  if (!state.first.defined())
    state.first = torch::zeros_like(parameter);
  state.steps += 1;
  const adam_scalars c = scalars_of(o, lr, state.steps);
  if (fusable(parameter, gradient, {&state.first, &state.second})) {
    auto next = at::empty_like(parameter);
    fused_adam_step(parameter, gradient, state, c, next);
    return next;
  }
  auto value = c.decay_factor != 1 ? parameter * c.decay_factor : parameter;
  auto grad = c.l2 != 0 ? gradient + c.l2 * parameter : gradient;
  state.first = state.first * c.beta1 + c.one_minus_beta1 * grad;
  state.second = state.second * c.beta2 + c.one_minus_beta2 * grad * grad;
  auto denom = state.second.sqrt() / c.bias_correction2_sqrt + c.eps;
  return value + c.minus_step_size * (state.first / denom);
}

} // namespace

at::Tensor optimizer_step_out_of_place(const at::Tensor& parameter, const at::Tensor& gradient,
                                       parameter_state& state, const optimizer_spec& optimizer,
                                       double lr) {
  torch::NoGradGuard no_grad;
  if (optimizer.name == "sgd") {
    optimizer_spec o = optimizer;
    o.lr = lr;
    auto next = sgd_step_out_of_place(parameter, gradient, state.first, o, state.steps == 0);
    state.steps += 1;
    return next;
  }
  return adam_step_out_of_place(parameter, gradient, state, optimizer, lr);
}

void optimizer_step_in_place(at::Tensor& parameter, const at::Tensor& gradient,
                             parameter_state& state, const optimizer_spec& optimizer, double lr) {
  torch::NoGradGuard no_grad;
  if (optimizer.name == "sgd") {
    optimizer_spec o = optimizer;
    o.lr = lr;
    sgd_step_in_place(parameter, gradient, state.first, o, state.steps == 0);
    state.steps += 1;
    return;
  }
  if (state.first.defined() && state.second.defined() &&
      fusable(parameter, gradient, {&state.first, &state.second}) &&
      gradient.data_ptr() != parameter.data_ptr()) {
    state.steps += 1;
    return fused_adam_step(parameter, gradient, state, scalars_of(optimizer, lr, state.steps),
                           parameter);
  }
  parameter.copy_(adam_step_out_of_place(parameter, gradient, state, optimizer, lr));
}

// -- clipping and schedule -----------------------------------------------------------

void clear_gradients(std::vector<at::Tensor>& parameters) {
  for (auto& p : parameters)
    p.mutable_grad() = at::Tensor();
}

std::vector<at::Tensor> clip_grad_norm(const std::vector<at::Tensor>& gradients,
                                       double max_norm) {
  if (max_norm <= 0)
    return gradients;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& g : gradients)
    if (g.defined())
      norms.push_back(at::norm(g, 2));
  if (norms.empty())
    return gradients;
  const at::Tensor total = at::norm(at::stack(norms), 2);
  const at::Tensor coefficient = at::clamp_max(max_norm / (total + 1e-6), 1.0);
  std::vector<at::Tensor> out;
  for (const auto& g : gradients)
    out.push_back(g.defined() ? g * coefficient : g);
  return out;
}

double lr_at(const optimizer_spec& o, int64_t step, int64_t steps_per_epoch, int64_t epochs,
             double scaled_peak) {
  if (steps_per_epoch <= 0)
    throw error("learning rate schedule: expected steps per epoch > 0");
  const double peak = scaled_peak > 0 ? scaled_peak : o.lr;
  const double warmup_steps = o.warmup_epochs * static_cast<double>(steps_per_epoch);
  const double at = static_cast<double>(step);
  if (warmup_steps > 0 && at < warmup_steps)
    return scaled_peak > 0 ? o.lr + (peak - o.lr) * at / warmup_steps
                           : peak * (at + 1) / warmup_steps;
  if (o.schedule == "step") {
    const int64_t epoch = step / steps_per_epoch;
    return peak * std::pow(o.gamma, std::floor(static_cast<double>(epoch) / o.step_epochs));
  }
  if (o.schedule == "cosine") {
    const double span = static_cast<double>(epochs * steps_per_epoch) - warmup_steps;
    if (span <= 0)
      return peak;
    const double t = std::min(at - warmup_steps, span);
    return o.min_lr + (peak - o.min_lr) * (1 + std::cos(M_PI * t / span)) / 2;
  }
  return peak;
}

std::string describe(const optimizer_spec& o) {
  std::string text = fmt::format("{} lr {:g}", o.name, o.lr);
  if (o.scheduled()) {
    text += " (" + o.schedule;
    if (o.warmup_epochs > 0)
      text += fmt::format(", warm-up {:g} epochs", o.warmup_epochs);
    text += ")";
  }
  if (o.name == "sgd")
    text += fmt::format(", momentum {:g}{}", o.momentum, o.nesterov ? " (nesterov)" : "");
  if (o.weight_decay > 0)
    text += fmt::format(", weight_decay {:g}", o.weight_decay);
  if (o.clip_grad_norm > 0)
    text += fmt::format(", clip_grad_norm {:g}", o.clip_grad_norm);
  return text;
}

} // namespace baton::model
