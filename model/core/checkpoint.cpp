#include "model/core/checkpoint.hpp"

#include <algorithm>
#include <map>
#include <filesystem>
#include <sstream>
#include <system_error>

#include <spdlog/spdlog.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/atomic_file.hpp"
#include "model/core/digest.hpp"
#include "model/core/error.hpp"

// A model file is a TorchScript archive, the format torch.jit.save writes, in
// one of two layouts that load_checkpoint both reads:
// - a checkpoint (save_checkpoint): one tensor per parameter and per buffer
//   (batch norm's running statistics) under its "layer.name" key as an
//   attribute of the top module (keys with dots are stored and read back as
//   they are, checked in checkpoint_test), no code;
// - an export (save_module, model/core/export.hpp): a submodule per layer
//   holding its tensors, so "layer.name" is the path of a parameter or
//   buffer, and a forward that PyTorch runs.
// Both hold the TorchScript extra file `baton.sha256`: the SHA-256 of every
// parameter and buffer (name, dtype, shape and bytes, in name order),
// checked on load; a pretrained checkpoint also `baton.settings`, the text of
// the settings that trained it (checkpoint_settings). LibTorch does not check the zip's CRCs, so before it a
// file with bytes overwritten loaded and trained to NaN. torch.jit.load
// ignores extra files: Python loads the file as it is.

namespace baton::model {

namespace fs = std::filesystem;

namespace {

using named_tensors = std::vector<std::pair<std::string, at::Tensor>>;

constexpr const char* checksum_file = "baton.sha256";
constexpr const char* settings_file = "baton.settings";

/// The SHA-256 of `tensors` as a model file's checksum covers them.
std::string checksum_of(named_tensors tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  sha256 h;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().cpu().contiguous();
    std::ostringstream head;
    head << name << '\n' << t.scalar_type() << ' ' << t.sizes() << '\n';
    auto text = head.str();
    h.update(text.data(), text.size());
    h.update(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return h.hex();
}

/// Every parameter and buffer of `module` and its submodules, by path.
named_tensors tensors_of(const torch::jit::Module& module) {
  named_tensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out.emplace_back(p.name, p.value);
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    out.emplace_back(b.name, b.value);
  return out;
}

/// Makes the directory of `path`; file_error naming it otherwise.
void make_parent_directory(const std::string& path) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw file_error(path + ": cannot create directory '" + target.parent_path().string() +
                       "' (" + ec.message() + ")");
  }
}

/// The bytes of the model file holding `module` (and `settings`, when not
/// empty), built in memory so that a full disk fails in replace_file, not
/// inside LibTorch's archive writer.
std::string module_bytes(const torch::jit::Module& module, const std::string& settings) {
  torch::jit::ExtraFilesMap extra{{checksum_file, checksum_of(tensors_of(module)) + "\n"}};
  if (!settings.empty())
    extra.emplace(settings_file, settings);
  std::ostringstream out;
  module.save(out, extra);
  return out.str();
}

/// save_module with the settings text of save_checkpoint.
void save_module_with(const torch::jit::Module& module, const std::string& path,
                      const std::string& settings) {
  make_parent_directory(path);
  std::string bytes;
  try {
    bytes = module_bytes(module, settings);
  } catch (const c10::Error& e) {
    throw file_error(path + ": cannot serialise the model (" + e.what_without_backtrace() + ")");
  }
  replace_file(path, bytes);
}

/// The checkpoint layout's module: `state` as attributes of one module.
torch::jit::Module flat_module(const named_tensors& state) {
  // What torch::serialize::OutputArchive builds.
  torch::jit::Module module("__torch__.Module", std::make_shared<torch::jit::CompilationUnit>(),
                            /*shouldMangle=*/true);
  for (const auto& [name, tensor] : state)
    module.register_parameter(name, tensor.detach(), /*is_buffer=*/false);
  return module;
}

/// The file's module with its checksum verified; file_error naming `path`
/// otherwise. A file without a checksum (written before baton wrote one) is
/// loaded with a warning.
torch::jit::Module verified_module(const std::string& path) {
  torch::jit::ExtraFilesMap extra{{checksum_file, ""}};
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::nullopt, extra);
  } catch (const c10::Error& e) {
    throw file_error(path + ": not a readable checkpoint (" + e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {
    throw file_error(path + ": not a readable checkpoint (" + e.what() + ")");
  }
  const auto tensors = tensors_of(module);
  auto expected = extra[checksum_file];
  if (!expected.empty() && expected.back() == '\n')
    expected.pop_back();
  if (expected.empty()) {
    spdlog::warn("{}: a model file without a checksum (written by an older baton, or not by "
                 "baton): loaded without verifying it",
                 path);
    return module;
  }
  if (auto found = checksum_of(tensors); found != expected)
    throw file_error(path + ": corrupt model file: its tensors have SHA-256 " + found +
                     ", the file's checksum says " + expected +
                     " (overwritten or damaged since it was written; write it again)");
  return module;
}

} // namespace

void save_checkpoint(const layered_model& m, const std::string& path,
                     const std::string& settings) {
  try {
    save_module_with(flat_module(m.named_state()), path, settings);
  } catch (const c10::Error& e) {
    throw file_error(path + ": cannot serialise the model (" + e.what_without_backtrace() + ")");
  }
}

void save_module(const torch::jit::Module& module, const std::string& path) {
  save_module_with(module, path, {});
}

std::optional<std::string> checkpoint_settings(const std::string& path) {
  if (!fs::is_regular_file(path))
    throw file_error(path + ": checkpoint file not found");
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    const std::string record = std::string{"extra/"} + settings_file;
    if (!reader.hasRecord(record))
      return std::nullopt;
    auto [data, size] = reader.getRecord(record);
    return std::string(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    throw file_error(path + ": not a readable checkpoint (" + e.what_without_backtrace() + ")");
  }
}

void load_checkpoint(layered_model& m, const std::string& path) {
  if (!fs::is_regular_file(path))
    throw file_error(path + ": checkpoint file not found");
  const auto module = verified_module(path);
  std::map<std::string, at::Tensor> stored;
  for (auto& [key, tensor] : tensors_of(module))
    stored.emplace(key, tensor);
  // Read and check everything before changing anything, so that a failed
  // load leaves the model as it was.
  auto params = m.named_state();
  std::vector<at::Tensor> values(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [key, param] = params[i];
    if (auto it = stored.find(key); it != stored.end())
      values[i] = it->second;
    else
      throw file_error(path + ": missing key '" + key + "' (a parameter or buffer of the model)");
    if (values[i].sizes() != param.sizes() || values[i].scalar_type() != param.scalar_type()) {
      std::ostringstream msg;
      msg << path << ": key '" << key << "' has shape " << values[i].sizes() << " "
          << values[i].scalar_type() << ", expected " << param.sizes() << " "
          << param.scalar_type();
      throw file_error(msg.str());
    }
  }
  // copy_ keeps the parameters' identity: slices, optimisers and TorchScript
  // interpreters holding the same tensors all see the loaded values.
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i)
    params[i].second.copy_(values[i]);
}

void load_pretrained_backbone(layered_model& whole, const std::string& path) {
  // The slice shares its modules with `whole`: loading it loads whole's.
  auto backbone = whole.slice(0, whole.size() - 1);
  load_checkpoint(backbone, path);
}

} // namespace baton::model
