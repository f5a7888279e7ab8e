#include "model/core/non_finite.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

namespace baton::model {

namespace {

/// Parameters above this magnitude have grown as diverging weights do (a
/// trained layer's weights are rarely above 10).
constexpr double grown = 1e4;

/// "NaN", "inf" or "NaN and inf": what a tensor that is not all finite holds.
std::string what_is_not_finite(const at::Tensor& t) {
  const bool nan = torch::isnan(t).any().item<bool>();
  const bool inf = torch::isinf(t).any().item<bool>();
  return nan && inf ? "NaN and inf" : nan ? "NaN" : "inf";
}

bool all_finite(const at::Tensor& t) {
  return !t.defined() || !t.is_floating_point() || torch::isfinite(t).all().item<bool>();
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

/// What `layer`'s parameters say of the cause: not finite, grown, or ordinary.
std::string parameters_of(const named_layer& layer) {
  double largest = 0;
  bool any = false;
  for (const auto& p : layer.module.ptr()->parameters()) {
    any = true;
    if (!all_finite(p))
      return "its parameters are not finite (" + what_is_not_finite(p) +
             "): the weights diverged in an earlier step (a smaller lr or momentum)";
    if (p.numel() > 0)
      largest = std::max(largest, p.detach().abs().max().item<double>());
  }
  if (!any)
    return "it has no parameters: its own arithmetic made it (a log, sqrt or division of "
           "what it is given, or an overflow)";
  if (largest > grown)
    return "its parameters are finite but have grown to |w| = " + number(largest) +
           ": the weights are diverging (a smaller lr or momentum)";
  return "its parameters are finite and of ordinary size (largest |w| " + number(largest) +
         "): its own arithmetic made it (a log, sqrt or division of what it is given, or an "
         "overflow), not the learning rate";
}

/// The buffers of `model` (batch norm's running statistics), copied, to be
/// put back after the search (a forward in training mode updates them).
std::vector<at::Tensor> kept_buffers(const layered_model& model) {
  std::vector<at::Tensor> kept;
  for (const auto& b : model.buffers())
    kept.push_back(b.detach().clone());
  return kept;
}

} // namespace

std::string non_finite_origin(const layered_model& model, const at::Tensor& input) {
  if (!all_finite(input))
    return "the input of these layers is not finite already (" + what_is_not_finite(input) +
           "): it comes from before them (the data, or the layers that computed it)";
  torch::NoGradGuard no_grad;
  const auto kept = kept_buffers(model);
  std::string found;
  at::Tensor x = input.detach();
  const auto& layers = model.layers();
  for (size_t i = 0; i < layers.size() && found.empty(); ++i) {
    x = model.slice(i, i + 1).forward(x);
    if (!all_finite(x))
      found = "layer '" + layers[i].name + "' (" + std::to_string(i + 1) + " of " +
              std::to_string(layers.size()) + ") is the first whose output is not finite (" +
              what_is_not_finite(x) + "), given a finite input; " + parameters_of(layers[i]);
  }
  auto buffers = model.buffers();
  for (size_t i = 0; i < buffers.size() && i < kept.size(); ++i)
    buffers[i].copy_(kept[i]);
  if (found.empty())
    return "every layer's output is finite when the step is run again: the loss itself is not "
           "(logits too large for the loss)";
  return found;
}

std::string non_finite_origin(const std::vector<at::Tensor>& parameters, const at::Tensor& input) {
  if (!all_finite(input))
    return "the input is not finite already (" + what_is_not_finite(input) + "): the data";
  double largest = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& p = parameters[i];
    if (!all_finite(p))
      return "parameter " + std::to_string(i + 1) + " of " + std::to_string(parameters.size()) +
             " is not finite (" + what_is_not_finite(p) +
             "): the weights diverged in an earlier step (a smaller lr or momentum)";
    if (p.defined() && p.numel() > 0)
      largest = std::max(largest, p.detach().abs().max().item<double>());
  }
  if (largest > grown)
    return "the parameters are finite but have grown to |w| = " + number(largest) +
           ": the weights are diverging (a smaller lr or momentum)";
  return "the input and the parameters are finite and of ordinary size (largest |w| " +
         number(largest) + "): the network's own arithmetic made it, not the learning rate";
}

namespace {

/// Searches with `search` and logs, the first time `loss` is not finite.
template <class Search>
void check_once(double loss, std::string& origin, const std::string& owner, Search&& search) {
  if (std::isfinite(loss) || !origin.empty())
    return;
  try {
    origin = search();
  } catch (const std::exception& e) {
    origin = std::string{"the layers could not be run again to find where ("} + e.what() + ")";
  }
  spdlog::warn("{}: the training loss is not finite ({}); {}", owner, number(loss), origin);
}

} // namespace

void non_finite_watch::check(double loss, const layered_model& model, const at::Tensor& input) {
  check_once(loss, origin_, owner_, [&] { return non_finite_origin(model, input); });
}

void non_finite_watch::check(double loss, const std::vector<at::Tensor>& parameters,
                             const at::Tensor& input) {
  check_once(loss, origin_, owner_, [&] { return non_finite_origin(parameters, input); });
}

} // namespace baton::model
