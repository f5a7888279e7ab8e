#include "model/checkpoint.hpp"

#include <atomic>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <thread>

#include <torch/torch.h>
#include <unistd.h>

#include "model/error.hpp"

// A checkpoint is a torch::serialize archive (the format torch::save writes)
// with one tensor per parameter and per buffer (batch norm's running
// statistics) under its "layer.name" key. Keys with dots
// are stored and read back as they are (checked in checkpoint_test), so no
// encoding is needed.

namespace baton::model {

namespace fs = std::filesystem;

namespace {

/// A temporary name next to `path`, unique per process and call, so that
/// concurrent writers of the same checkpoint never share a temporary file.
fs::path temporary_path(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  std::ostringstream name;
  name << path.filename().string() << ".tmp." << ::getpid() << "."
       << std::hash<std::thread::id>{}(std::this_thread::get_id()) << "." << counter++;
  return path.parent_path() / name.str();
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
  torch::serialize::OutputArchive archive;
  for (const auto& p : m.named_state())
    archive.write(p.first, p.second.detach());
  const fs::path tmp = temporary_path(target);
  try {
    archive.save_to(tmp.string());
  } catch (const c10::Error& e) {
    fs::remove(tmp, ec);
    throw file_error(path + ": cannot write checkpoint (" + e.what_without_backtrace() + ")");
  }
  // rename() replaces the target atomically: a reader sees the old or the new
  // checkpoint, never half of one.
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw file_error(path + ": cannot move checkpoint into place (" + ec.message() + ")");
  }
}

void load_checkpoint(layered_model& m, const std::string& path) {
  if (!fs::is_regular_file(path))
    throw file_error(path + ": checkpoint file not found");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw file_error(path + ": not a readable checkpoint (" + e.what_without_backtrace() + ")");
  }
  // Read and check everything before changing anything, so that a failed
  // load leaves the model as it was.
  auto params = m.named_state();
  std::vector<at::Tensor> values(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [key, param] = params[i];
    bool found = false;
    try {
      found = archive.try_read(key, values[i]);
    } catch (const c10::Error& e) {
      throw file_error(path + ": cannot read key '" + key + "' (" + e.what_without_backtrace() +
                       ")");
    }
    if (!found)
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
