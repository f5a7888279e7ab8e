#pragma once

// Codecs between the structs of types.hpp and the Cap'n Proto schema
// (messages/baton.capnp). Every encoded message is an Envelope carrying the
// schema version; tensors are raw bytes (dtype, shape, data), copied at most
// once on each side.

#include <cstdint>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "messages/types.hpp"

namespace baton::messages {

/// Limits applied while encoding and decoding.
struct codec_limits {
  /// Largest tensor, and largest message apart from its headers, in bytes
  /// (a tensor_set's tensors together, an actor_report's trace included).
  uint64_t max_message_bytes = default_max_message_bytes;
  /// Room above max_message_bytes for the rest of a message (scalars,
  /// strings, labels, capnp framing), so that a tensor of exactly
  /// max_message_bytes can still be sent: a message may have
  /// max_message_bytes + header_slack_bytes bytes.
  uint64_t header_slack_bytes = uint64_t{4} << 20;
  /// Whether large tensors are written to, and accepted from, files in
  /// /dev/shm instead of the message (see use_shared_memory). Their bytes
  /// count against max_message_bytes as the message's own do.
  bool shared_memory = false;
};

/// Turns on (or off) shared memory for the large tensors of the messages
/// this process sends to, and accepts from, other processes (CAF's
/// serialization below): for node processes that all run on this host,
/// where the kernel's TCP copies are the most expensive part of a message.
/// Never for emulated hosts or nodes of other hosts: a receiver that does
/// not use it refuses such a tensor. Turning it on removes the slabs left
/// by processes that no longer run (messages/shared_memory.hpp) and
/// arranges for this process's own to go at its exit; turning it off drops
/// this process's slabs and mappings at once.
void use_shared_memory(bool on);

/// Whether use_shared_memory(true) was called (and not undone).
bool shared_memory_in_use();

/// An uninitialised float32 vector of `numel` elements that is to be sent:
/// while use_shared_memory(true) is in force and it is large enough to
/// travel so, its bytes are in this process's shared memory, and a message
/// of it (or of a view of it) to another process of this host copies
/// nothing; otherwise, or when no slab can be made, at::empty's.
at::Tensor empty_for_sending(int64_t numel);

/// An encoded message: a Cap'n Proto flat array (segment table + segments).
using wire_bytes = std::vector<char>;

// -- encoding: fails with payload_too_large, shape_mismatch (a tensor that is
// not dense) or unknown_dtype (a dtype without wire code, e.g. complex) -------

caf::expected<wire_bytes> encode(const microbatch& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const gradient& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const tensor_set& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const credit& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const control& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const actor_report& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const node_report& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const spawn_request& x, const codec_limits& limits = {});
caf::expected<wire_bytes> encode(const progress& x, const codec_limits& limits = {});

// -- decoding: never throws; any bad input is an error value -----------------

/// Decodes `bytes` as a message of type T. Fails with malformed_message,
/// unknown_schema_version, unknown_dtype, shape_mismatch or payload_too_large.
template <class T>
caf::expected<T> decode(const char* bytes, size_t size, const codec_limits& limits = {});

template <class T>
caf::expected<T> decode(const wire_bytes& bytes, const codec_limits& limits = {}) {
  return decode<T>(bytes.data(), bytes.size(), limits);
}

// -- CAF serialization: used only when a message crosses a process -----------
//
// The serializer writes a uint32 length and the encoded bytes as raw byte
// ranges (apply_raw of the segment table and of each capnp segment: large
// tensors are referenced by the message, so their bytes are copied once, into
// CAF's buffer). A message that cannot be encoded (too large, unsupported
// dtype) or whose `invalid` is set travels as a refusal carrying the error.
// The deserializer never fails the CAF message for bad content: it sets
// `x.invalid` instead (see types.hpp) so the receiving actor can refuse it.
// Limits on this path are the defaults of codec_limits, with shared_memory as
// use_shared_memory set it.

#define BATON_DECLARE_INSPECT(type)                                            \
  caf::error inspect(caf::serializer& f, type& x);                             \
  caf::error inspect(caf::deserializer& f, type& x);                           \
  /** Human-readable summary for CAF's to_string / logging. */                 \
  std::string to_string(const type& x);

BATON_DECLARE_INSPECT(microbatch)
BATON_DECLARE_INSPECT(gradient)
BATON_DECLARE_INSPECT(tensor_set)
BATON_DECLARE_INSPECT(credit)
BATON_DECLARE_INSPECT(control)
BATON_DECLARE_INSPECT(actor_report)
BATON_DECLARE_INSPECT(node_report)
BATON_DECLARE_INSPECT(spawn_request)
BATON_DECLARE_INSPECT(progress)

#undef BATON_DECLARE_INSPECT

/// Bytes a microbatch occupies on an edge (payload, boundary input, labels),
/// for metrics.
int64_t payload_bytes(const microbatch& x);

} // namespace baton::messages
