#pragma once

#include <optional>
#include <string>

#include "model/core/layered_model.hpp"

namespace torch::jit {
struct Module;
} // namespace torch::jit

namespace baton::model {

/// Writes every parameter and buffer of `m` (named_state()) under its
/// "layer.name" key, with their SHA-256, through replace_file: all or
/// nothing, `path` keeps its previous content on any failure. `settings`,
/// when given, is stored beside them (the text of what made the weights,
/// checkpoint_settings reads it back). Throws model::file_error naming
/// `path` and the cause (a full disk, a read-only directory).
void save_checkpoint(const layered_model& m, const std::string& path,
                     const std::string& settings = {});

/// The settings text save_checkpoint stored in the model file at `path`;
/// nullopt for a file without one (an export, a file of an older baton).
/// Reads that entry of the archive only, not the tensors. Throws
/// model::file_error naming `path` when it is no readable model file.
std::optional<std::string> checkpoint_settings(const std::string& path);

/// Writes `module` (an export: model/core/export.hpp) to `path` as
/// torch.jit.save does, with the SHA-256 of its parameters and buffers,
/// through replace_file. Throws model::file_error naming `path` and the
/// cause.
void save_module(const torch::jit::Module& module, const std::string& path);

/// Loads the parameters and buffers of the layers present in `m` from `path`, a
/// checkpoint (save_checkpoint) or an export (save_module) whose "layer.name"
/// paths are m's (it may hold a larger model: loading a slice from a
/// whole-model checkpoint works).
/// Throws model::file_error naming the file (and key) on a missing file, a
/// file whose tensors do not match its checksum (corrupt), a missing key or
/// a shape mismatch; the model is then unchanged.
void load_checkpoint(layered_model& m, const std::string& path);

/// Loads a pretrained backbone (`baton pretrain`'s whole-model checkpoint,
/// or an export of one) into `whole`, a backbone followed by its classifier:
/// every layer but the last, which keeps its seeded weights (the file's
/// classifier is its pretraining task's, perhaps with other classes).
/// Throws as load_checkpoint.
void load_pretrained_backbone(layered_model& whole, const std::string& path);

} // namespace baton::model
