#pragma once

// The fully connected network of independent subnet training (issue 12,
// part A) as plain tensors: the `mlp` of DESIGN.md with any number and width
// of hidden layers. A subnet is the same structure with narrower hidden
// layers, so forward, loss and evaluation serve both.
//
//   x [B, in] -> linear(W_0) -> bn(g_0, b_0) -> relu -> linear(W_1) -> bn(g_1, b_1)
//     -> relu -> ... -> linear(W_L) -> bn(no affine) -> logits [B, classes]
//
// No biases. Every batch norm uses the statistics of the batch it sees, in
// training and in evaluation (no running statistics: training and evaluation
// compute the same function; eps 1e-5 as torch's default). The batch norm on
// the logits has no affine parameters, as the authors' code has it: a
// subnet's logits are a partial sum over its neurons, and the normalisation
// makes their scale irrelevant.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"

namespace baton::model::ist {

/// The most hidden layers an IST network may have (`hidden:` of job: ist and
/// of data-parallel's ist_mlp).
inline constexpr size_t max_hidden_layers = 16;
/// The widest hidden layer.
inline constexpr int64_t max_width = 65536;

/// The shape of an IST network: input width, hidden widths, classes.
struct shape {
  int64_t inputs = 784;                 ///< flattened sample width (28 x 28 x channels)
  std::vector<int64_t> hidden{4096};    ///< one entry per hidden layer (`hidden: [...]`)
  int64_t classes = 10;
};

/// An IST network or subnet: float32 tensors, owned by this value (copies of
/// the struct share them, as tensors do). Hidden layer k (0-based) has
/// weights[k] (its incoming weights, [hidden[k], previous width]) and batch
/// norm affine parameters bn_weight[k], bn_bias[k] ([hidden[k]]);
/// weights.back() is the output layer ([classes, hidden.back()]).
struct network {
  std::vector<at::Tensor> weights;   ///< hidden.size() + 1 matrices, [out, in]
  std::vector<at::Tensor> bn_weight; ///< gamma per hidden layer
  std::vector<at::Tensor> bn_bias;   ///< beta per hidden layer

  /// Number of hidden layers.
  size_t hidden_layers() const { return bn_weight.size(); }
  /// The shape these tensors have.
  ist::shape shape() const;
  /// Every tensor in layer order: weights[0], bn_weight[0], bn_bias[0],
  /// weights[1], bn_weight[1], bn_bias[1], ..., weights.back() (the order of
  /// the mlp's named_parameters: fc1, bn1, fc2, bn2, ..., the output layer).
  std::vector<at::Tensor> parameters() const;
  /// Names of parameters(), "fc1.weight", "bn1.weight", "bn1.bias", ...
  std::vector<std::string> parameter_names() const;
  /// Scalar parameters in all.
  int64_t numel() const;
  /// A deep copy (new storage).
  network clone() const;
};

/// A fresh network from `seed` alone (a local generator, never torch's
/// global one): weight matrix i uniform in +-1/sqrt(fan_in) from a generator
/// seeded with derive_seed(seed, "fc<i+1>"), as PyTorch's linear layers are
/// in distribution; gamma ones, beta zeros. Same seed, same bits on every
/// machine. Throws model::error on a non-positive width or an empty
/// `hidden`.
network make_network(const shape& shape, uint64_t seed);

/// Throws model::error, as make_network does, on a shape it does not build.
void check_shape(const shape& shape);

/// The logits [B, classes] of `images` ([B, ...], flattened to [B, inputs]).
/// Autograd records it when the tensors require gradients. B >= 2 (batch
/// statistics of one sample are undefined: torch throws).
at::Tensor forward(const network& net, const at::Tensor& images);

/// The mean cross entropy of the logits (log_softmax + nll, the authors'
/// loss).
at::Tensor loss(const at::Tensor& logits, const at::Tensor& labels);

/// What an evaluation measured.
struct evaluation {
  double loss = 0;     ///< mean cross entropy over the samples
  double accuracy = 0; ///< fraction of samples whose arg-max logit is the label
  int64_t samples = 0;
};

/// Evaluates `net` (whole network or subnet) on `data` in order, in batches
/// of `batch_size` (plan_eval's batches); the batch statistics are each
/// batch's, so the result depends on `batch_size`. A last batch of one
/// sample joins the batch before it. No gradients.
evaluation evaluate(const network& net, const dataset& data, int64_t batch_size = 256);

/// SHA-256 (hex) of parameters()' raw bytes, in that order.
std::string digest(const network& net);

} // namespace baton::model::ist
