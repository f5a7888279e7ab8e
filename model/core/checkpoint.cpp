#include "model/core/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <system_error>

#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/atomic_file.hpp"
#include "model/core/digest.hpp"
#include "model/core/error.hpp"

// A model file is a TorchScript archive, the format torch::save and
// torch::serialize::OutputArchive write: one tensor per parameter and per
// buffer (batch norm's running statistics) under its "layer.name" key (keys
// with dots are stored and read back as they are, checked in
// checkpoint_test). It also holds the TorchScript extra file `baton.sha256`:
// the SHA-256 of every tensor (name, dtype, shape and bytes, in name order),
// checked on load. LibTorch does not check the zip's CRCs, so before it a
// file with bytes overwritten loaded and trained to NaN. torch.jit.load
// ignores extra files: Python still loads the file as before.

namespace baton::model {

namespace fs = std::filesystem;

namespace {

using named_tensors = std::vector<std::pair<std::string, at::Tensor>>;

constexpr const char* checksum_file = "baton.sha256";

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

/// The bytes of the model file holding `state`, built in memory so that a
/// full disk fails in replace_file, not inside LibTorch's archive writer.
std::string model_file_bytes(const named_tensors& state) {
  // What OutputArchive builds, plus the extra file it cannot write.
  torch::jit::Module module("__torch__.Module", std::make_shared<torch::jit::CompilationUnit>(),
                            /*shouldMangle=*/true);
  named_tensors detached;
  for (const auto& [name, tensor] : state) {
    detached.emplace_back(name, tensor.detach());
    module.register_parameter(name, detached.back().second, /*is_buffer=*/false);
  }
  std::ostringstream out;
  module.save(out, {{checksum_file, checksum_of(detached) + "\n"}});
  return out.str();
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
  named_tensors tensors;
  for (const auto& a : module.named_attributes(/*recurse=*/false))
    if (a.value.isTensor())
      tensors.emplace_back(a.name, a.value.toTensor());
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

/// The tensor `key` of `module`, undefined when absent.
at::Tensor tensor_of(const torch::jit::Module& module, const std::string& key,
                     const std::string& path) {
  try {
    if (!module.hasattr(key))
      return {};
    auto value = module.attr(key);
    return value.isTensor() ? value.toTensor() : at::Tensor{};
  } catch (const c10::Error& e) {
    throw file_error(path + ": cannot read key '" + key + "' (" + e.what_without_backtrace() +
                     ")");
  }
}

} // namespace

void save_checkpoint(const layered_model& m, const std::string& path) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw file_error(path + ": cannot create directory '" + target.parent_path().string() +
                       "' (" + ec.message() + ")");
  }
  std::string bytes;
  try {
    bytes = model_file_bytes(m.named_state());
  } catch (const c10::Error& e) {
    throw file_error(path + ": cannot serialise the model (" + e.what_without_backtrace() + ")");
  }
  replace_file(path, bytes);
}

void load_checkpoint(layered_model& m, const std::string& path) {
  if (!fs::is_regular_file(path))
    throw file_error(path + ": checkpoint file not found");
  const auto module = verified_module(path);
  // Read and check everything before changing anything, so that a failed
  // load leaves the model as it was.
  auto params = m.named_state();
  std::vector<at::Tensor> values(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [key, param] = params[i];
    values[i] = tensor_of(module, key, path);
    if (!values[i].defined())
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

} // namespace baton::model
