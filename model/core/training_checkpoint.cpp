#include "model/core/training_checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include "model/core/atomic_file.hpp"
#include "model/core/digest.hpp"
#include "model/core/error.hpp"

namespace baton::model {

namespace fs = std::filesystem;

namespace {

constexpr const char* magic = "BATONCKPT";
constexpr int format = 1;

at::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  std::copy(s.begin(), s.end(), t.data_ptr<uint8_t>());
  return t;
}

std::string tensor_bytes(const at::Tensor& t) {
  auto c = t.contiguous();
  const auto* p = c.data_ptr<uint8_t>();
  return std::string(p, p + c.numel());
}

/// The archive's bytes: the named tensors plus the names, version and
/// counters under "baton.*" keys.
std::string serialize(const training_state& s) {
  torch::serialize::OutputArchive archive;
  std::string names;
  for (const auto& [name, tensor] : s.tensors) {
    if (name.find('\n') != std::string::npos || name.rfind("baton.", 0) == 0)
      throw error("checkpoint: tensor name '" + name + "' is reserved or has a newline");
    archive.write(name, tensor.detach().contiguous());
    names += name + '\n';
  }
  archive.write("baton.names", bytes_tensor(names));
  archive.write("baton.version", torch::tensor(s.version, torch::kInt64));
  archive.write("baton.counters", bytes_tensor(s.counters));
  archive.write("baton.run_id", bytes_tensor(s.run_id));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

training_state deserialize(const std::string& payload, const std::string& path) {
  torch::serialize::InputArchive archive;
  training_state s;
  try {
    std::istringstream in(payload);
    archive.load_from(in);
    // Each read into a tensor of its own: InputArchive::read into a defined
    // tensor set_()s its storage but keeps the tensor's dtype, so reading the
    // int64 version into the uint8 names tensor kept its low byte (step 300
    // read back as 44).
    auto read = [&](const std::string& key) {
      at::Tensor value;
      archive.read(key, value);
      return value;
    };
    std::istringstream names(tensor_bytes(read("baton.names")));
    for (std::string name; std::getline(names, name);)
      s.tensors.emplace_back(name, read(name));
    s.version = read("baton.version").item<int64_t>();
    s.counters = tensor_bytes(read("baton.counters"));
    // Absent in the checkpoints of a baton before run ids.
    if (at::Tensor id; archive.try_read("baton.run_id", id))
      s.run_id = tensor_bytes(id);
  } catch (const c10::Error& e) {
    throw file_error(path + ": not a readable checkpoint archive (" + e.what_without_backtrace() +
                     ")");
  }
  return s;
}

} // namespace

const at::Tensor& training_state::at(const std::string& name) const {
  for (const auto& [key, tensor] : tensors)
    if (key == name)
      return tensor;
  throw file_error("checkpoint: no tensor '" + name + "'");
}

const at::Tensor& training_state::matching(const std::string& name,
                                           const at::Tensor& like) const {
  const auto& t = at(name);
  if (!t.sizes().equals(like.sizes()) || t.scalar_type() != like.scalar_type()) {
    std::ostringstream msg;
    msg << "checkpoint: tensor '" << name << "' is " << t.sizes() << " " << t.scalar_type()
        << ", the model has " << like.sizes() << " " << like.scalar_type();
    throw file_error(msg.str());
  }
  return t;
}

checkpoint_store::checkpoint_store(std::string dir, int32_t keep)
  : dir_(std::move(dir)), keep_(std::max(keep, 1)) {}

std::string checkpoint_store::path_of(int64_t step) const {
  char name[40];
  std::snprintf(name, sizeof name, "step-%012lld.ckpt", static_cast<long long>(step));
  return (fs::path(dir_) / name).string();
}

void checkpoint_store::save(const training_state& s) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw file_error(dir_ + ": cannot create the checkpoint directory (" + ec.message() + ")");
  auto payload = serialize(s);
  std::ostringstream header;
  header << magic << ' ' << format << ' ' << sha256_hex(payload) << ' ' << payload.size()
         << '\n';
  // Written whole or not at all: a full disk leaves the older checkpoints
  // and no temporary file (replace_file).
  replace_file(path_of(s.version), header.str() + payload);
  auto steps = steps_on_disk();
  for (size_t i = 0; i + keep_ < steps.size(); ++i)
    fs::remove(path_of(steps[i]), ec);
  remove_stale_temporaries();
}

// One actor of one live run writes here (the run holds the directory's
// lock), and its own temporary file is gone once replace_file returns: any
// step-N.ckpt.tmp.* left is from a writer that was killed mid-save.
void checkpoint_store::remove_stale_temporaries() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    auto name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.find(".ckpt.tmp.") != std::string::npos)
      fs::remove(entry.path(), ec);
  }
}

std::vector<int64_t> checkpoint_store::steps_on_disk() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    long long step = -1;
    char tail = 0;
    auto name = entry.path().filename().string();
    // The name must be exactly the one path_of gives (no sign, no extra digits).
    if (std::sscanf(name.c_str(), "step-%lld.ckp%c", &step, &tail) == 2 && tail == 't' &&
        step >= 0 && fs::path(path_of(step)).filename() == name)
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string checkpoint_store::verified_payload(int64_t step) const {
  auto path = path_of(step);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw file_error(path + ": checkpoint not found");
  std::string word, checksum;
  int version = 0;
  size_t length = 0;
  in >> word >> version >> checksum >> length;
  if (!in || word != magic || in.get() != '\n')
    throw file_error(path + ": not a baton checkpoint (bad header)");
  if (version != format)
    throw file_error(path + ": checkpoint format " + std::to_string(version) +
                     ", this baton reads " + std::to_string(format));
  std::string payload(length, '\0');
  in.read(payload.data(), static_cast<std::streamsize>(length));
  if (static_cast<size_t>(in.gcount()) != length)
    throw file_error(path + ": truncated checkpoint (" + std::to_string(in.gcount()) + " of " +
                     std::to_string(length) + " bytes)");
  if (in.peek() != std::ifstream::traits_type::eof())
    throw file_error(path + ": checkpoint has bytes after its payload");
  if (sha256_hex(payload) != checksum)
    throw file_error(path + ": corrupt checkpoint (checksum mismatch)");
  return payload;
}

training_state checkpoint_store::load(int64_t step) const {
  auto path = path_of(step);
  auto s = deserialize(verified_payload(step), path);
  if (s.version != step)
    throw file_error(path + ": holds step " + std::to_string(s.version) + ", not " +
                     std::to_string(step));
  return s;
}

std::vector<int64_t> checkpoint_store::valid_steps() const {
  std::vector<int64_t> valid;
  for (auto step : steps_on_disk()) {
    try {
      verified_payload(step);
      valid.push_back(step);
    } catch (const error&) {
    }
  }
  return valid;
}

std::optional<training_state> checkpoint_store::load_newest(
  int64_t at_most, std::vector<std::string>* skipped) const {
  auto steps = steps_on_disk();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it > at_most)
      continue;
    try {
      return load(*it);
    } catch (const error& e) {
      if (skipped != nullptr)
        skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

} // namespace baton::model
