// Fuzz target: the tensor codec alone (messages/tensor_codec.hpp), on tensors
// whose dtype, shape and bytes the fuzzer chooses freely: shapes that do not
// match their bytes, huge or negative dimensions, too many dimensions,
// unknown dtype codes. Built as a valid Cap'n Proto Tensor first, so that
// every input reaches read_tensor's own checks (fuzz_messages covers the
// bytes around it).
//
// Input: byte 0 the dtype code, byte 1 the number of dimensions (mod 80),
// then one little-endian int64 per dimension, then the tensor's bytes.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <capnp/message.h>

#include "messages/baton.capnp.h"
#include "messages/errc.hpp"
#include "messages/tensor_codec.hpp"

namespace {

using namespace baton::messages;
using namespace baton::messages::detail;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_tensor: %s\n", what.c_str());
  std::abort();
}

/// The tensor of the input, as a sender would have written it.
void build(wire::Tensor::Builder b, const uint8_t* data, size_t size) {
  b.setDtype(static_cast<wire::DType>(size > 0 ? data[0] : 0));
  size_t dims = size > 1 ? data[1] % 80 : 0;
  size_t at = 2;
  dims = std::min(dims, size > at ? (size - at) / sizeof(int64_t) : 0);
  auto shape = b.initShape(static_cast<unsigned>(dims));
  for (size_t i = 0; i < dims; ++i, at += sizeof(int64_t)) {
    int64_t dim = 0;
    std::memcpy(&dim, data + at, sizeof(dim));
    shape.set(static_cast<unsigned>(i), dim);
  }
  if (size > at)
    std::memcpy(b.initData(static_cast<unsigned>(size - at)).begin(), data + at, size - at);
}

/// `t` must hold the very bytes, shape and dtype of `r`, readable in full.
void check_same(const at::Tensor& t, wire::Tensor::Reader r) {
  if (!t.defined() || !t.is_contiguous())
    fail("decoded tensor is undefined or not dense");
  auto shape = r.getShape();
  if (static_cast<size_t>(t.dim()) != shape.size())
    fail("decoded tensor has another number of dimensions");
  for (unsigned i = 0; i < shape.size(); ++i)
    if (t.size(i) != shape[i])
      fail("decoded tensor has another shape");
  auto data = r.getData();
  if (t.nbytes() != data.size())
    fail("decoded tensor has another byte length");
  if (data.size() > 0 && std::memcmp(t.data_ptr(), data.begin(), data.size()) != 0)
    fail("decoded tensor has other bytes");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  capnp::MallocMessageBuilder message;
  auto written = message.initRoot<wire::Tensor>();
  build(written, data, size);
  auto r = written.asReader();
  codec_limits limits;
  limits.max_message_bytes = 1 << 20; // shapes above it are refused before any allocation
  at::Tensor copied;
  uint64_t shared_left = limits.max_message_bytes; // shared memory is off: refused, never read
  auto err = read_tensor(r, "tensor", limits, nullptr, shared_left, copied);
  // A view sharing `owner`: the message outlives it here.
  shared_words owner{new uint64_t[1]};
  at::Tensor viewed;
  auto view_err = read_tensor(r, "tensor", limits, owner, shared_left, viewed);
  if (static_cast<bool>(err) != static_cast<bool>(view_err))
    fail("copy and view disagree: " + baton::describe(err) + " / " + baton::describe(view_err));
  if (err) {
    if (err.category() != baton::error_category_atom)
      fail("not a baton error: " + baton::describe(err));
    return 0;
  }
  check_same(copied, r);
  check_same(viewed, r);
  // What was read can be written back, to the same wire form.
  capnp::MallocMessageBuilder again;
  tensor_references references;
  if (auto back = write_tensor(again.initRoot<wire::Tensor>(), copied, "tensor", limits,
                               references))
    fail("decoded tensor cannot be encoded again: " + baton::describe(back));
  check_same(copied, again.getRoot<wire::Tensor>().asReader());
  return 0;
}
