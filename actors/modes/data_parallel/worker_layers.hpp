#pragma once

// The layers of the model a data-parallel worker holds (make_worker_model,
// worker.hpp), listed without building it: what the freeze section checks
// its keys against. A unit that includes this header compiles without
// LibTorch's headers.

#include "model/core/layer_listing.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// make_worker_model(spec)'s layers: names, ties and the layers that
/// normalise over the batch, read from the declarations (a TorchScript
/// backbone's by loading it). Throws model::error as make_worker_model does.
model::layer_listing list_worker_layers(const model::model_spec& spec);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
