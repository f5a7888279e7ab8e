#pragma once

// IST's network (network.hpp) as a layered_model, so that a strategy that
// trains layered models (data-parallel's `model: ist_mlp`) trains the same
// network as job: ist, bit for bit.

#include "model/core/layer_listing.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

namespace baton::model::ist {

/// The model_spec name make_mlp builds.
inline constexpr const char* mlp_name = "ist_mlp";

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

/// make_mlp(spec)'s layers, listed without building the network: their
/// names, no ties, and its batch norms (every bn<k> and `norm`) as the layers
/// that normalise over the batch. Throws as make_mlp does on a bad shape.
layer_listing list_mlp_layers(const model_spec& spec);

} // namespace baton::model::ist
