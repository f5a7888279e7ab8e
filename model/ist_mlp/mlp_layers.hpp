#pragma once

// The layers of IST's network as a layered_model (mlp.hpp), listed without
// LibTorch's modules: what a config check needs to know of `model: ist_mlp`.

#include "model/core/layer_listing.hpp"
#include "model/core/specs.hpp"

namespace baton::model::ist {

/// The model_spec name make_mlp builds.
inline constexpr const char* mlp_name = "ist_mlp";

/// make_mlp(spec)'s layers, listed without building the network: their
/// names, no ties, and its batch norms (every bn<k> and `norm`) as the layers
/// that normalise over the batch. Throws as make_mlp does on a bad shape.
layer_listing list_mlp_layers(const model_spec& spec);

} // namespace baton::model::ist
