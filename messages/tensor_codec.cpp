#include "messages/tensor_codec.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <capnp/orphan.h>

#include "messages/errc.hpp"
#include "messages/shared_memory.hpp"

// Tensor bytes travel in host order: that assumes a little-endian host (every
// machine baton runs on).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "baton's wire format assumes a little-endian host");

namespace baton::messages::detail {

namespace {

/// Tensors at least this large are referenced by the message instead of being
/// copied into it, so that their bytes are copied once, into the output.
constexpr size_t reference_threshold = 4096;

/// Tensors with more dimensions than this are refused as malformed shapes.
constexpr size_t max_dims = 64;

// -- dtypes ----------------------------------------------------------------------

struct dtype_info {
  wire::DType code;
  at::ScalarType scalar;
  const char* name;
};

constexpr std::array<dtype_info, 10> dtypes{{
  {wire::DType::FLOAT32, at::kFloat, "float32"},
  {wire::DType::FLOAT64, at::kDouble, "float64"},
  {wire::DType::INT64, at::kLong, "int64"},
  {wire::DType::INT32, at::kInt, "int32"},
  {wire::DType::UINT8, at::kByte, "uint8"},
  {wire::DType::INT8, at::kChar, "int8"},
  {wire::DType::FLOAT16, at::kHalf, "float16"},
  {wire::DType::BFLOAT16, at::kBFloat16, "bfloat16"},
  {wire::DType::BOOL, at::kBool, "bool"},
  {wire::DType::INT16, at::kShort, "int16"},
}};

const dtype_info* find_dtype(at::ScalarType x) {
  for (const auto& info : dtypes)
    if (info.scalar == x)
      return &info;
  return nullptr;
}

const dtype_info* find_dtype(wire::DType x) {
  for (const auto& info : dtypes)
    if (info.code == x)
      return &info;
  return nullptr;
}

std::string shape_text(at::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// -- encoding ------------------------------------------------------------------

void reference(wire::Tensor::Builder b, const at::Tensor& x, size_t nbytes,
               tensor_references& references) {
  auto bytes = static_cast<const capnp::byte*>(x.data_ptr());
  auto orphanage = capnp::Orphanage::getForMessageContaining(b);
  b.adoptData(orphanage.referenceExternalData(capnp::Data::Reader{bytes, nbytes}));
  references.tensors.push_back(x);
  references.external.emplace_back(reinterpret_cast<const capnp::word*>(bytes), nbytes);
}

// -- decoding ------------------------------------------------------------------

/// The byte size of `shape` in `info`'s dtype, refused when a dimension is
/// negative or the size overflows or exceeds the limit.
caf::expected<uint64_t> checked_bytes(const std::vector<int64_t>& shape, const dtype_info& info,
                                      const std::string& what, const codec_limits& limits) {
  uint64_t count = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      return make_error(errc::shape_mismatch, what + ": dimension " + std::to_string(i)
                        + " of shape " + shape_text(shape) + " is negative");
    overflow |= __builtin_mul_overflow(count, static_cast<uint64_t>(shape[i]), &count);
  }
  uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(count, c10::elementSize(info.scalar), &bytes);
  if (overflow || bytes > limits.max_message_bytes)
    return make_error(errc::payload_too_large, what + ": shape " + shape_text(shape) + " of "
                      + info.name + " exceeds " + limit_text(limits));
  return bytes;
}

} // namespace

// -- error texts ---------------------------------------------------------------

std::string size_text(uint64_t bytes) {
  constexpr uint64_t mib = uint64_t{1} << 20;
  if (bytes >= mib && bytes % mib == 0)
    return std::to_string(bytes / mib) + " MiB";
  auto text = std::to_string(bytes) + " bytes";
  if (bytes >= mib) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), " (%.2f MiB)", static_cast<double>(bytes) / mib);
    text += buf;
  }
  return text;
}

std::string limit_text(const codec_limits& limits) {
  return "the " + size_text(limits.max_message_bytes) + " limit";
}

// -- encoding ------------------------------------------------------------------

caf::error write_tensor(wire::Tensor::Builder b, const at::Tensor& x, const std::string& what,
                        const codec_limits& limits, tensor_references& references) {
  if (x.layout() != at::kStrided)
    return make_error(errc::shape_mismatch,
                      what + ": only dense (strided) tensors can be sent");
  auto info = find_dtype(x.scalar_type());
  if (info == nullptr)
    return make_error(errc::unknown_dtype, what + ": dtype "
                      + std::string{c10::toString(x.scalar_type())} + " cannot be sent");
  auto nbytes = static_cast<uint64_t>(x.numel()) * x.element_size();
  if (nbytes > limits.max_message_bytes)
    return make_error(errc::payload_too_large, what + ": tensor of " + size_text(nbytes)
                      + " exceeds " + limit_text(limits));
  // detach: a tensor that requires grad must not grow the autograd graph here.
  auto dense = x.detach();
  if (!dense.device().is_cpu())
    dense = dense.cpu();
  dense = dense.contiguous();
  b.setDtype(info->code);
  auto shape = b.initShape(static_cast<unsigned>(dense.dim()));
  for (int64_t i = 0; i < dense.dim(); ++i)
    shape.set(static_cast<unsigned>(i), dense.size(i));
  if (nbytes == 0)
    return caf::none;
  if (limits.shared_memory && nbytes >= shared_memory_threshold &&
      references.shared_bytes + nbytes <= limits.max_message_bytes) {
    if (auto place = share_bytes(dense.data_ptr(), nbytes)) {
      b.setShared(place->name);
      b.setSharedOffset(place->offset);
      references.shared_bytes += nbytes;
      return caf::none;
    }
  }
  auto bytes = static_cast<const capnp::byte*>(dense.data_ptr());
  if (nbytes >= reference_threshold && reinterpret_cast<uintptr_t>(bytes) % sizeof(capnp::word) == 0) {
    reference(b, dense, nbytes, references);
  } else {
    // Small or misaligned (a view at an odd offset): copy into the message.
    std::memcpy(b.initData(static_cast<unsigned>(nbytes)).begin(), bytes, nbytes);
  }
  return caf::none;
}

// -- decoding ------------------------------------------------------------------

caf::error read_tensor(wire::Tensor::Reader r, const std::string& what,
                       const codec_limits& limits, const shared_words& owner,
                       uint64_t& shared_left, at::Tensor& out) {
  auto info = find_dtype(r.getDtype());
  if (info == nullptr)
    return make_error(errc::unknown_dtype, what + ": dtype code "
                      + std::to_string(static_cast<unsigned>(r.getDtype()))
                      + " is unknown to this build");
  auto dims = r.getShape();
  if (dims.size() > max_dims)
    return make_error(errc::shape_mismatch, what + ": " + std::to_string(dims.size())
                      + " dimensions, at most " + std::to_string(max_dims) + " are accepted");
  std::vector<int64_t> shape;
  shape.reserve(dims.size());
  for (auto dim : dims)
    shape.push_back(dim);
  auto bytes = checked_bytes(shape, *info, what, limits);
  if (!bytes)
    return std::move(bytes.error());
  auto data = r.getData();
  auto options = at::TensorOptions().dtype(info->scalar);
  if (r.hasShared()) {
    if (!limits.shared_memory)
      return make_error(errc::malformed_message,
                        what + ": its bytes are in another process's shared memory, which this "
                               "process does not use (node processes on one host only)");
    if (data.size() != 0)
      return make_error(errc::malformed_message,
                        what + ": has both bytes and shared memory");
    if (*bytes > shared_left)
      return make_error(errc::payload_too_large,
                        what + ": the message's tensors in shared memory exceed " +
                          limit_text(limits));
    shared_left -= *bytes;
    return take_bytes(r.getShared(), r.getSharedOffset(), *bytes, shape, options, what, out);
  }
  if (data.size() != *bytes)
    return make_error(errc::shape_mismatch, what + ": shape " + shape_text(shape) + " of "
                      + info->name + " needs " + std::to_string(*bytes)
                      + " bytes, the data has " + std::to_string(data.size()));
  if (*bytes == 0) {
    out = at::empty(shape, options);
  } else if (owner != nullptr) {
    // A view into the received buffer: no copy; the deleter shares ownership.
    auto keep = owner;
    auto first = const_cast<capnp::byte*>(data.begin());
    out = at::from_blob(first, shape, [keep](void*) {}, options);
  } else {
    out = at::empty(shape, options);
    std::memcpy(out.data_ptr(), data.begin(), *bytes);
  }
  return caf::none;
}

} // namespace baton::messages::detail
