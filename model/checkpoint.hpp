#pragma once

#include <string>

#include "model/layered_model.hpp"

namespace baton::model {

/// Writes every parameter and buffer of `m` (named_state()) under its
/// "layer.name" key, atomically
/// (temporary file + rename). Throws model::error on I/O failure.
void save_checkpoint(const layered_model& m, const std::string& path);

/// Loads the parameters and buffers of the layers present in `m` from `path` (which may
/// hold a larger model: loading a slice from a whole-model checkpoint works).
/// Throws model::error naming the file and key on a missing file, a missing
/// key or a shape mismatch.
void load_checkpoint(layered_model& m, const std::string& path);

} // namespace baton::model
