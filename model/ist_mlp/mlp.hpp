#pragma once

// IST's network (network.hpp) as a layered_model, so that a strategy that
// trains layered models (data-parallel's `model: ist_mlp`) trains the same
// network as job: ist, bit for bit.

#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"
#include "model/ist_mlp/mlp_layers.hpp"

namespace baton::model::ist {

/// IST's network as layers: flatten, then per hidden layer k fc<k> (no bias)
/// bn<k> (batch statistics, affine) relu<k>, then fc<L+1> (no bias) and `norm`
/// (affine-free batch statistics on the logits). Input 28 x 28 x
/// `spec.in_channels`, widths `spec.hidden`, `spec.classes` outputs; its
/// parameters are those of make_network(shape, spec.seed), in
/// network::parameters()' order and bits, and its forward is forward's
/// (BatchNorm1d without running statistics calls torch::batch_norm with the
/// batch's statistics, as forward does). Throws model::error on
/// `classes <= 0`, an empty `hidden` or a non-positive width.
layered_model make_mlp(const model_spec& spec);

} // namespace baton::model::ist
