#pragma once

// The field mapping of codec.cpp: one write_fields and one read_fields
// overload per message struct of types.hpp, between the struct and its member
// of the Envelope union (messages/baton.capnp). codec.cpp builds and parses the
// envelope around them. Internal to messages/: it includes the generated
// baton.capnp.h, which no other layer may see.

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <caf/error.hpp>

#include "messages/baton.capnp.h"
#include "messages/codec.hpp"
#include "messages/tensor_codec.hpp"
#include "messages/types.hpp"

namespace baton::messages::detail {

// -- text ------------------------------------------------------------------------

/// A capnp view of `x` (no copy; `x` must outlive the view).
capnp::Text::Reader text_of(const std::string& x);

/// A copy of `x`.
std::string string_of(capnp::Text::Reader x);

// -- encoding ------------------------------------------------------------------

/// What write_fields needs besides the struct: the limits, and the tensors that
/// the message references instead of copying them.
class encoder {
public:
  /// `references` must live until the message's bytes are written out.
  encoder(const codec_limits& limits, tensor_references& references)
    : limits_(limits), references_(references) {
    // nop
  }

  /// Writes `x` (defined) into `b`; `what` names it in error messages.
  caf::error tensor(wire::Tensor::Builder b, const at::Tensor& x, const std::string& what) {
    return write_tensor(b, x, what, limits_, references_);
  }

  /// Refuses strings that alone exceed the limit (capnp would throw later).
  caf::error text(const std::string& x, const char* what) const;

private:
  const codec_limits& limits_;
  tensor_references& references_;
};

// Fill the union member of the envelope; fail as write_tensor does.

caf::error write_fields(encoder& e, wire::Microbatch::Builder b, const microbatch& x);
caf::error write_fields(encoder& e, wire::Gradient::Builder b, const gradient& x);
caf::error write_fields(encoder& e, wire::TensorSet::Builder b, const tensor_set& x);
caf::error write_fields(encoder& e, wire::Credit::Builder b, const credit& x);
caf::error write_fields(encoder& e, wire::Control::Builder b, const control& x);
caf::error write_fields(encoder& e, wire::ActorReport::Builder b, const actor_report& x);
caf::error write_fields(encoder& e, wire::NodeReport::Builder b, const node_report& x);
caf::error write_fields(encoder& e, wire::SpawnRequest::Builder b, const spawn_request& x);
caf::error write_fields(encoder& e, wire::Progress::Builder b, const progress& x);

// -- decoding ------------------------------------------------------------------

/// What read_fields needs besides the reader: the limits, the buffer that
/// decoded tensors may view, and how many words of the message its lists may
/// still claim (see claim).
class decoder {
public:
  /// `owner` is null when the bytes are borrowed: tensors are then copied out.
  /// `message_words` is the size of the whole message in 8-byte words.
  decoder(const codec_limits& limits, shared_words owner, uint64_t message_words)
    : limits_(limits), owner_(std::move(owner)), unclaimed_words_(message_words),
      shared_left_(limits.max_message_bytes) {
    // nop
  }

  /// Reads `r` into `out`; `what` names it in error messages.
  caf::error tensor(wire::Tensor::Reader r, const std::string& what, at::Tensor& out) {
    return read_tensor(r, what, limits_, owner_, shared_left_, out);
  }

  /// Claims the words that a list of `count` entries of `words_each` words
  /// occupies in a message that this build wrote, before any entry becomes a
  /// C++ object; fails with malformed_message when the message has fewer
  /// words left than that. `what` names the list in error messages.
  caf::error claim(uint64_t count, uint64_t words_each, const char* what);

private:
  const codec_limits& limits_;
  shared_words owner_;
  uint64_t unclaimed_words_;
  uint64_t shared_left_; ///< bytes the message's shared tensors may still hold
};

// Read the union member of the envelope into a default-constructed struct;
// fail as read_tensor does (or with malformed_message for an unknown enum or
// a list longer than the message can hold). May throw kj::Exception for bytes
// that capnp itself refuses.

caf::error read_fields(decoder& d, wire::Microbatch::Reader r, microbatch& x);
caf::error read_fields(decoder& d, wire::Gradient::Reader r, gradient& x);
caf::error read_fields(decoder& d, wire::TensorSet::Reader r, tensor_set& x);
caf::error read_fields(decoder& d, wire::Credit::Reader r, credit& x);
caf::error read_fields(decoder& d, wire::Control::Reader r, control& x);
caf::error read_fields(decoder& d, wire::ActorReport::Reader r, actor_report& x);
caf::error read_fields(decoder& d, wire::NodeReport::Reader r, node_report& x);
caf::error read_fields(decoder& d, wire::SpawnRequest::Reader r, spawn_request& x);
caf::error read_fields(decoder& d, wire::Progress::Reader r, progress& x);

} // namespace baton::messages::detail
