#pragma once

// The parts model/core builds models from (model/core/layered_model.cpp's
// make_model): deterministic initialisation, the common layers, the built-in
// networks from their declarations (architecture.hpp) and a TorchScript
// file's children. Internal to model/: callers outside it use make_model.

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "model/core/architecture.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// Re-initialises every parameter of `m` from `seed` alone, as `weights` says
/// (PyTorch's defaults in distribution: uniform +-1/sqrt(fan_in) for weights
/// and biases of linear and convolution layers; ones and zeros for
/// normalisation), but from a local generator: modules are built concurrently
/// in several threads, and the global torch generator would make the weights
/// depend on the interleaving. Buffers keep the values their modules start
/// with (running mean 0, running variance 1).
void initialise(layered_model& m, uint64_t seed,
                weight_init weights = weight_init::fan_in_uniform);

// -- layers --------------------------------------------------------------------

named_layer linear_layer(const char* name, int64_t in, int64_t out, bool bias = true);
named_layer relu_layer(const char* name);
named_layer flatten_layer(const char* name);
/// Batch norm over `features` without running statistics.
named_layer batch_norm_layer(const char* name, int64_t features);

// -- built-in networks ---------------------------------------------------------

/// The layers of a declared model (architecture.hpp), built in order.
std::vector<named_layer> build_layers(const model_declaration& declaration);

/// The top-level children of the TorchScript file `spec.path`, each a layer.
/// Throws file_error on a missing or unreadable file, and on a module that is
/// not its children run in order (none; one that fails on the previous one's
/// output; its forward and the chained children disagreeing on
/// probe_input(spec)), naming its children and the form expected.
std::vector<named_layer> torchscript_layers(const model_spec& spec);

/// The parameters of `layer`, a TorchScript child, that its file keeps out
/// of training (`requires_grad=False` when it was saved); none for another
/// layer.
std::vector<at::Tensor> parameters_frozen_by_file(const torch::nn::Module& layer);

/// Why `e` happened, in one line: the last line of its message, without a
/// c10::Error's backtrace or the TorchScript interpreter's traceback (it
/// throws torch::jit::JITException, a std::runtime_error, for an error
/// raised inside a script): "RuntimeError: mat1 and mat2 shapes cannot be
/// multiplied (56x28 and 784x32)".
std::string error_reason(const std::exception& e);

/// Two samples of the data's shape [2, in_channels, in_height, in_width],
/// the same deterministic values every call (no generator is drawn): what
/// a model is probed with to check its form and measure its output.
at::Tensor probe_input(const model_spec& spec);

} // namespace baton::model
