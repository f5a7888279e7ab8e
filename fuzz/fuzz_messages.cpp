// Fuzz target: the bytes as every message that baton sends between processes
// (messages/codec.hpp), through the entry points a receiving node uses:
// decode<T> on aligned and on misaligned bytes, and CAF's deserializer
// (inspect) both on a well-framed copy and on the raw bytes as a CAF stream.
//
// Bad bytes must be an error value: a crash, a sanitizer report, a hang
// (-timeout) or an absurd allocation (-rss_limit_mb / -malloc_limit_mb) fails
// the run. What decodes must be a message this build can read in full and
// send again.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/types.hpp"

namespace {

using namespace baton::messages;

[[noreturn]] void fail(const char* kind, const std::string& what) {
  std::fprintf(stderr, "fuzz_messages: %s: %s\n", kind, what.c_str());
  std::abort();
}

// -- what a decoded message must satisfy ------------------------------------------

/// Reads every byte of `t` here, in instrumented code, so that a tensor that
/// views memory it does not own is an AddressSanitizer report.
void read_all(const at::Tensor& t, const char* kind) {
  if (!t.defined())
    return;
  if (!t.is_contiguous() || t.nbytes() != static_cast<size_t>(t.numel()) * t.element_size())
    fail(kind, "decoded tensor is not dense");
  auto first = static_cast<const unsigned char*>(t.data_ptr());
  unsigned sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i)
    sum += first[i];
  volatile unsigned sink = sum;
  (void) sink;
}

template <class T>
void read_tensors(const T&, const char*) {
  // No tensors in this message type.
}

void read_tensors(const microbatch& x, const char* kind) {
  read_all(x.payload, kind);
  for (const auto& task : x.labels)
    read_all(task.values, kind);
  // Decoded sample ids: none, or one id >= 0 per payload row.
  if (x.samples.empty())
    return;
  if (!x.payload.defined() || x.payload.dim() == 0 ||
      x.payload.size(0) != static_cast<int64_t>(x.samples.size()))
    fail(kind, "decoded sample ids that do not match the payload's rows");
  for (int64_t id : x.samples)
    if (id < 0)
      fail(kind, "decoded a negative sample id");
}

void read_tensors(const gradient& x, const char* kind) {
  read_all(x.value, kind);
}

void read_tensors(const tensor_set& x, const char* kind) {
  for (const auto& t : x.tensors)
    read_all(t, kind);
}

/// A decoded message is one that this build can log, send again and read back.
template <class T>
void check_decoded(const T& x, const char* kind) {
  read_tensors(x, kind);
  if (to_string(x).empty())
    fail(kind, "empty summary");
  auto again = encode(x);
  if (!again)
    fail(kind, "decoded, but cannot be encoded again: " + baton::describe(again.error()));
  auto back = decode<T>(*again);
  if (!back)
    fail(kind, "encoded again, but cannot be decoded: " + baton::describe(back.error()));
}

// -- the entry points of a receiving node ----------------------------------------

/// CAF's deserializer over `bytes`, as the middleman hands a message over.
/// Returns whether `x` holds a message (false: an error or `invalid` set).
template <class T>
bool through_caf(const std::vector<char>& stream, T& x) {
  caf::binary_deserializer source{nullptr, stream.data(), stream.size()};
  if (auto err = inspect(source, x))
    return false;
  return !x.invalid;
}

template <class T>
void decode_as(const uint8_t* data, size_t size, const char* kind) {
  auto bytes = reinterpret_cast<const char*>(data);
  // libFuzzer's buffer is heap memory: word-aligned, so the tensors are copied.
  auto aligned = decode<T>(bytes, size);
  if (aligned)
    check_decoded(*aligned, kind);
  // One byte off: copied once into words that the tensors then view.
  std::vector<char> shifted(size + 1);
  std::memcpy(shifted.data() + 1, bytes, size);
  auto misaligned = decode<T>(shifted.data() + 1, size);
  if (static_cast<bool>(misaligned) != static_cast<bool>(aligned))
    fail(kind, "decode differs between aligned and misaligned bytes");
  if (misaligned)
    check_decoded(*misaligned, kind);
  // CAF's path, well framed: uint32 length, then the bytes.
  std::vector<char> frame;
  caf::binary_serializer sink{nullptr, frame};
  if (sink(static_cast<uint32_t>(size)) || sink.apply_raw(size, const_cast<char*>(bytes)))
    fail(kind, "cannot frame the input");
  T via_caf;
  if (through_caf(frame, via_caf) != static_cast<bool>(aligned))
    fail(kind, "CAF's deserializer and decode disagree");
  if (!via_caf.invalid)
    read_tensors(via_caf, kind);
  // CAF's path on the raw bytes: the length itself comes from the input.
  T raw;
  if (through_caf(std::vector<char>(bytes, bytes + size), raw))
    read_tensors(raw, kind);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_as<microbatch>(data, size, "microbatch");
  decode_as<gradient>(data, size, "gradient");
  decode_as<tensor_set>(data, size, "tensor_set");
  decode_as<credit>(data, size, "credit");
  decode_as<control>(data, size, "control");
  decode_as<actor_report>(data, size, "actor_report");
  decode_as<node_report>(data, size, "node_report");
  decode_as<spawn_request>(data, size, "spawn_request");
  decode_as<progress>(data, size, "progress");
  return 0;
}
