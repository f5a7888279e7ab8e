// Writes the seed corpora of fuzz_messages and fuzz_tensor: a valid encoding
// of every message type (and a refusal, and a message with a referenced
// tensor segment), and tensors of every dtype in fuzz_tensor's input form.
// Run by hand when the wire schema changes; the output is committed:
//
//   cmake --build build/fuzz --target fuzz_write_seeds
//   build/fuzz/fuzz_write_seeds fuzz/corpus
//
// The files are named seed-*: regression inputs found by fuzzing are named
// after what they broke and are kept next to them, never rewritten.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ops/arange.h>
#include <caf/binary_serializer.hpp>

#include "messages/codec.hpp"
#include "messages/errc.hpp"

namespace {

using namespace baton::messages;
namespace fs = std::filesystem;

bool write_file(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_write_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

at::Tensor values(int64_t count, at::ScalarType dtype) {
  return at::arange(count, at::TensorOptions().dtype(at::kLong)).to(dtype);
}

template <class T>
bool write_message(const fs::path& dir, const std::string& name, const T& x) {
  auto bytes = encode(x);
  if (!bytes) {
    std::fprintf(stderr, "fuzz_write_seeds: %s: %s\n", name.c_str(),
                 baton::describe(bytes.error()).c_str());
    return false;
  }
  return write_file(dir / ("seed-" + name), *bytes);
}

/// What a sender writes in place of a message it cannot send: CAF's frame
/// without its uint32 length.
bool write_refusal(const fs::path& dir) {
  microbatch x;
  x.invalid = baton::make_error(baton::errc::shape_mismatch, "payload: seed");
  std::vector<char> frame;
  caf::binary_serializer sink{nullptr, frame};
  if (inspect(sink, x))
    return false;
  return write_file(dir / "seed-refusal", std::vector<char>(frame.begin() + 4, frame.end()));
}

bool write_messages(const fs::path& dir) {
  microbatch mb;
  mb.id = 42;
  mb.step = 7;
  mb.epoch = 2;
  mb.step_size = 4;
  mb.weight_version = 13;
  mb.payload = values(2 * 1 * 4 * 4, at::kFloat).reshape({2, 1, 4, 4});
  mb.labels = {{"all", values(2, at::kLong)}, {"footwear", values(2, at::kLong)}};
  mb.samples = {17, 4};
  microbatch referenced = mb; // 4 KiB: a segment of its own (codec.cpp write_flat)
  referenced.payload = values(4 * 1 * 16 * 16, at::kFloat).reshape({4, 1, 16, 16});
  referenced.samples = {59999, 0, 3, 12};
  gradient grad{41, 7, 12, values(8, at::kFloat).reshape({2, 4}), {}};
  tensor_set set{"gradients", "stage-1-replica-0", 1, 7, 4,
                 {values(6, at::kFloat).reshape({2, 3}), at::Tensor{}, values(3, at::kDouble),
                  values(4, at::kHalf), values(2, at::kBool), values(0, at::kFloat)},
                 {}};
  credit cr{41, 3, {}};
  control ctl{control_kind::epoch_end, 2, 17, "epoch 2 done", {}};
  actor_report report;
  report.actor = "head-0";
  report.role = "head";
  report.task = "all";
  report.node = "n1";
  report.busy_seconds = 1.5;
  report.samples = 128;
  report.weights_digest = "00ff";
  report.edges = {{"stage0", "head-0", 12, 4096}};
  report.epochs = {{0, 1.25, 0.5, 64}, {1, 0.75, 0.625, 64}};
  report.trace = {{"forward", 1000, 20, 3, 1}, {"step", 1100, 5, -1, 2}};
  node_report node{"n1", 1 << 20, 0.25, 2, int64_t{1} << 30, {}};
  spawn_request spawn{"head", "head-0", "task: all\nseed: 7\n", {}};
  progress prog{"head-0", 1, 256, 0.5, {}};
  return write_message(dir, "microbatch", mb) && write_message(dir, "microbatch-4k", referenced)
         && write_message(dir, "gradient", grad) && write_message(dir, "tensor_set", set)
         && write_message(dir, "credit", cr) && write_message(dir, "control", ctl)
         && write_message(dir, "actor_report", report) && write_message(dir, "node_report", node)
         && write_message(dir, "spawn_request", spawn) && write_message(dir, "progress", prog)
         && write_refusal(dir);
}

/// fuzz_tensor's input form: dtype code, dimension count, dimensions, bytes.
std::vector<char> tensor_input(uint8_t dtype, const std::vector<int64_t>& shape, size_t bytes) {
  std::vector<char> out{static_cast<char>(dtype), static_cast<char>(shape.size())};
  for (int64_t dim : shape) {
    char raw[sizeof(dim)];
    std::memcpy(raw, &dim, sizeof(dim));
    out.insert(out.end(), raw, raw + sizeof(dim));
  }
  for (size_t i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>(i * 37));
  return out;
}

bool write_tensors(const fs::path& dir) {
  // Element sizes of the wire dtypes, in code order (messages/baton.capnp).
  const size_t element_size[] = {4, 8, 8, 4, 1, 1, 2, 2, 1, 2};
  for (uint8_t code = 0; code < 10; ++code)
    if (!write_file(dir / ("seed-dtype" + std::to_string(code)),
                    tensor_input(code, {2, 3}, 6 * element_size[code])))
      return false;
  return write_file(dir / "seed-scalar", tensor_input(0, {}, 4))
         && write_file(dir / "seed-empty", tensor_input(0, {0, 5}, 0))
         && write_file(dir / "seed-4d", tensor_input(0, {2, 1, 2, 2}, 32));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_write_seeds CORPUS_DIR (writes messages/ and tensor/)\n");
    return 2;
  }
  fs::path root = argv[1];
  std::error_code ec;
  fs::create_directories(root / "messages", ec);
  fs::create_directories(root / "tensor", ec);
  return write_messages(root / "messages") && write_tensors(root / "tensor") ? 0 : 1;
}
