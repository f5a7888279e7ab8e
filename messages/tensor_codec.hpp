#pragma once

// Tensors on the wire for codec.cpp: the dtype table, the checks on a
// tensor's layout, dtype, shape and size, and its bytes, which are copied
// into a message, referenced by it, or viewed in place once received.
// Internal to messages/: it includes the generated baton.capnp.h, which no
// other layer may see.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/error.hpp>
#include <capnp/common.h>

#include "messages/baton.capnp.h"
#include "messages/codec.hpp"

namespace baton::messages::detail {

// -- error texts ---------------------------------------------------------------

/// "64 MiB" for whole MiB, else "67108865 bytes (64.00 MiB)" or "12 bytes".
std::string size_text(uint64_t bytes);

/// "the 64 MiB limit": how errors name `limits.max_message_bytes`.
std::string limit_text(const codec_limits& limits);

// -- encoding ------------------------------------------------------------------

/// Tensor memory that an outgoing message points into instead of holding a
/// copy of it; must live until the message's bytes are written out.
struct tensor_references {
  /// Keeps the memory of referenced tensors alive until the bytes are out.
  std::vector<at::Tensor> tensors;
  /// Start of each referenced segment and its exact byte length: capnp rounds
  /// the segment up to whole words, but the bytes past a tensor's end are not
  /// ours to read, so write_flat pads with zeros instead.
  std::vector<std::pair<const capnp::word*, size_t>> external;
  /// Bytes of tensors written to shared memory instead (limits.shared_memory).
  uint64_t shared_bytes = 0;
};

/// Writes `x` (defined) into `b`; `what` names it in error messages.
///
/// Fails with shape_mismatch (not dense), unknown_dtype (no wire code) or
/// payload_too_large (more than `limits.max_message_bytes` bytes). Large,
/// word-aligned tensors are referenced rather than copied: they are added to
/// `references`, which then keeps their memory alive. With
/// `limits.shared_memory`, tensors of at least shared_memory_threshold bytes
/// go to a shared file (while the message's shared bytes stay within the
/// limit; the bytes go in the message when the file cannot be written).
caf::error write_tensor(wire::Tensor::Builder b, const at::Tensor& x, const std::string& what,
                        const codec_limits& limits, tensor_references& references);

// -- decoding ------------------------------------------------------------------

/// Word-aligned memory holding received bytes; decoded tensors may be views
/// into it and keep it alive through their deleters.
using shared_words = std::shared_ptr<uint64_t[]>;

/// Reads `r` into `out`; `what` names it in error messages.
///
/// `owner` holds the bytes that `r` reads from: `out` is then a view into
/// them that shares their ownership. When `owner` is null the bytes are only
/// borrowed, and `out` gets a copy. A tensor in shared memory is accepted
/// with `limits.shared_memory` only, and takes its bytes from `shared_left`
/// (what the message's shared tensors may still hold). Fails with
/// unknown_dtype, shape_mismatch (too many dimensions, negative sizes, data
/// of the wrong length), malformed_message or payload_too_large; never
/// throws for bad input.
caf::error read_tensor(wire::Tensor::Reader r, const std::string& what,
                       const codec_limits& limits, const shared_words& owner,
                       uint64_t& shared_left, at::Tensor& out);

} // namespace baton::messages::detail
