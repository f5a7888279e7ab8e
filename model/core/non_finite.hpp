#pragma once

// Where a non-finite training loss came from (issue 32 item 11): the layers
// that computed it are run again, one at a time and without gradients, on
// the input of the step, to name the first layer whose output is NaN or inf
// and say whether its input and its parameters were finite. Nothing is
// checked while the loss is finite: the search runs once, at the first
// non-finite loss a trainer sees.

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/layered_model.hpp"

namespace baton::model {

/// Why `model`'s output on `input` (a training step's input) is not finite,
/// in one sentence: "layer 'fc2' (4 of 5) is the first whose output is not
/// finite (NaN), given a finite input; its parameters are finite and of
/// ordinary size (largest |w| 0.31): the layer's own arithmetic (...)",
/// or that the input is not finite already, or that the parameters are not
/// finite or have grown (the weights diverged). The layers run in their
/// current mode; batch norm's running statistics are put back as they were.
std::string non_finite_origin(const layered_model& model, const at::Tensor& input);

/// The same for a model that is a list of parameter tensors (IST's
/// networks): the input, or the first parameter (by position) that is not
/// finite or has grown; else that they are finite and of ordinary size.
std::string non_finite_origin(const std::vector<at::Tensor>& parameters, const at::Tensor& input);

/// Watches the losses of one trainer: the first time a loss is not finite,
/// logs a warning naming `owner` ("head 'a'", "the last pipeline stage",
/// "data-parallel worker 0") and non_finite_origin() of the step; later
/// ones are not searched again.
class non_finite_watch {
public:
  explicit non_finite_watch(std::string owner = "the model") : owner_(std::move(owner)) {}

  /// `loss` of a step whose layers are `model` and input `input`: searched
  /// and logged when it is the first non-finite one.
  void check(double loss, const layered_model& model, const at::Tensor& input);
  /// The same for a model given as its parameters.
  void check(double loss, const std::vector<at::Tensor>& parameters, const at::Tensor& input);

  /// What the first non-finite loss's search found ("" while none was seen).
  const std::string& origin() const { return origin_; }

  void set_owner(std::string owner) { owner_ = std::move(owner); }

private:
  std::string owner_;
  std::string origin_;
};

} // namespace baton::model
