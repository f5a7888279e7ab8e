#include "messages/codec.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include <ATen/ops/empty.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>
#include <kj/exception.h>

#include "messages/baton.capnp.h"
#include "messages/crossing_cpu.hpp"
#include "messages/errc.hpp"
#include "messages/fields.hpp"
#include "messages/shared_memory.hpp"
#include "messages/tensor_codec.hpp"

// capnp's segment table is written by hand below (write_flat): that assumes a
// little-endian host (every machine baton runs on), as tensor bytes do.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "baton's wire format assumes a little-endian host");

namespace baton::messages {

namespace {

// Tensors on the wire (messages/tensor_codec.hpp).
using detail::limit_text;
using detail::shared_words;
using detail::size_text;
using detail::tensor_references;

// Struct fields on the wire (messages/fields.hpp).
using detail::decoder;
using detail::encoder;
using detail::read_fields;
using detail::string_of;
using detail::text_of;
using detail::write_fields;

using body_which = wire::Envelope::Body::Which;

constexpr size_t word_size = sizeof(capnp::word);

/// use_shared_memory's switch.
std::atomic<bool> shared_memory{false};

/// The limits of messages that cross a process (CAF's serialization).
codec_limits process_limits() {
  codec_limits limits;
  limits.shared_memory = shared_memory.load(std::memory_order_relaxed);
  return limits;
}

// -- text and error helpers ----------------------------------------------------

caf::error out_of_memory(uint64_t bytes) {
  return make_error(errc::payload_too_large,
                    "cannot allocate " + size_text(bytes) + " for a message");
}

uint64_t max_frame_bytes(const codec_limits& limits) {
  return limits.max_message_bytes + limits.header_slack_bytes;
}

// -- the struct <-> union member table -------------------------------------------

template <class T>
struct wire_kind;

#define BATON_WIRE_KIND(type, Member, MEMBER)                                  \
  template <>                                                                  \
  struct wire_kind<type> {                                                     \
    static constexpr body_which which = wire::Envelope::Body::MEMBER;          \
    static constexpr const char* name = #type;                                 \
    static auto init(wire::Envelope::Body::Builder x) { return x.init##Member(); } \
    static auto get(wire::Envelope::Body::Reader x) { return x.get##Member(); }    \
  };

BATON_WIRE_KIND(microbatch, Microbatch, MICROBATCH)
BATON_WIRE_KIND(gradient, Gradient, GRADIENT)
BATON_WIRE_KIND(tensor_set, TensorSet, TENSOR_SET)
BATON_WIRE_KIND(credit, Credit, CREDIT)
BATON_WIRE_KIND(control, Control, CONTROL)
BATON_WIRE_KIND(actor_report, ActorReport, ACTOR_REPORT)
BATON_WIRE_KIND(node_report, NodeReport, NODE_REPORT)
BATON_WIRE_KIND(spawn_request, SpawnRequest, SPAWN_REQUEST)
BATON_WIRE_KIND(progress, Progress, PROGRESS)

#undef BATON_WIRE_KIND

std::string kind_text(body_which x) {
  switch (x) {
    case wire::Envelope::Body::MICROBATCH: return "microbatch";
    case wire::Envelope::Body::GRADIENT: return "gradient";
    case wire::Envelope::Body::TENSOR_SET: return "tensor_set";
    case wire::Envelope::Body::CREDIT: return "credit";
    case wire::Envelope::Body::CONTROL: return "control";
    case wire::Envelope::Body::ACTOR_REPORT: return "actor_report";
    case wire::Envelope::Body::NODE_REPORT: return "node_report";
    case wire::Envelope::Body::SPAWN_REQUEST: return "spawn_request";
    case wire::Envelope::Body::PROGRESS: return "progress";
    case wire::Envelope::Body::REFUSED: return "refusal";
  }
  return "unknown message kind " + std::to_string(static_cast<unsigned>(x));
}

// -- encoding ------------------------------------------------------------------

/// A built message and the tensor memory that some of its segments point into.
struct outgoing_message {
  capnp::MallocMessageBuilder builder;
  /// The tensors that segments of `builder` point into.
  tensor_references references;
  size_t size_bytes = 0;
};

using outgoing_ptr = std::unique_ptr<outgoing_message>;

/// Checks the size of a built message and records it.
caf::error finish(outgoing_message& out, const codec_limits& limits, const char* kind) {
  out.size_bytes = capnp::computeSerializedSizeInWords(out.builder) * word_size;
  if (out.size_bytes <= max_frame_bytes(limits))
    return caf::none;
  return make_error(errc::payload_too_large,
                    std::string{kind} + ": message of " + size_text(out.size_bytes)
                      + " exceeds " + limit_text(limits) + " (plus "
                      + size_text(limits.header_slack_bytes) + " for headers)");
}

template <class T>
caf::expected<outgoing_ptr> build(const T& x, const codec_limits& limits) {
  try {
    auto out = std::make_unique<outgoing_message>();
    auto envelope = out->builder.initRoot<wire::Envelope>();
    envelope.setVersion(schema_version);
    encoder e{limits, out->references};
    if (auto err = write_fields(e, wire_kind<T>::init(envelope.getBody()), x))
      return err;
    if (auto err = finish(*out, limits, wire_kind<T>::name))
      return err;
    return out;
  } catch (const kj::Exception& ex) {
    return make_error(errc::malformed_message, std::string{"cannot encode "} + wire_kind<T>::name
                      + ": " + ex.getDescription().cStr());
  } catch (const std::exception& ex) {
    return make_error(errc::malformed_message,
                      std::string{"cannot encode "} + wire_kind<T>::name + ": " + ex.what());
  }
}

/// A message that stands for one that could not be sent (see Refusal).
outgoing_ptr build_refusal(const caf::error& reason) {
  constexpr size_t max_text = 4096;
  auto out = std::make_unique<outgoing_message>();
  auto envelope = out->builder.initRoot<wire::Envelope>();
  envelope.setVersion(schema_version);
  auto refused = envelope.getBody().initRefused();
  bool ours = reason.category() == error_category_atom;
  refused.setCode(ours ? reason.code() : static_cast<uint8_t>(errc::malformed_message));
  auto text = describe(reason).substr(0, max_text);
  refused.setText(text_of(text));
  out->size_bytes = capnp::computeSerializedSizeInWords(out->builder) * word_size;
  return out;
}

/// Writes the flat-array form of `out` (segment table, then the segments) as
/// a few raw byte ranges: `sink(const void*, size_t) -> caf::error`.
template <class Sink>
caf::error write_flat(outgoing_message& out, Sink&& sink) {
  auto segments = out.builder.getSegmentsForOutput();
  // Count - 1, then each size in words, padded to a whole word.
  std::vector<uint32_t> table((segments.size() + 2) & ~size_t{1}, 0);
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  for (size_t i = 0; i < segments.size(); ++i)
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
  if (auto err = sink(table.data(), table.size() * sizeof(uint32_t)))
    return err;
  static constexpr capnp::byte zeros[word_size] = {};
  for (auto segment : segments) {
    size_t bytes = segment.size() * word_size;
    for (const auto& [start, exact] : out.references.external)
      if (start == segment.begin())
        bytes = exact;
    if (auto err = sink(segment.begin(), bytes))
      return err;
    if (bytes % word_size != 0)
      if (auto err = sink(zeros, word_size - bytes % word_size))
        return err;
  }
  return caf::none;
}

template <class T>
caf::expected<wire_bytes> encode_as(const T& x, const codec_limits& limits) {
  auto out = build(x, limits);
  if (!out)
    return std::move(out.error());
  wire_bytes result;
  try {
    result.reserve((*out)->size_bytes);
  } catch (const std::bad_alloc&) {
    return out_of_memory((*out)->size_bytes);
  }
  auto append = [&result](const void* data, size_t size) {
    auto first = static_cast<const char*>(data);
    result.insert(result.end(), first, first + size);
    return caf::error{};
  };
  if (auto err = write_flat(**out, append))
    return err;
  return result;
}

// -- decoding ------------------------------------------------------------------

/// Uninitialized words for `bytes` bytes; null if memory is exhausted (the
/// size was checked against the limits already, so that is all that is left).
shared_words make_words(size_t bytes) {
  try {
    return shared_words{new uint64_t[(bytes + word_size - 1) / word_size]};
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

/// Refuses a frame of `size` bytes before anything is allocated or parsed.
caf::error check_frame(uint64_t size, const codec_limits& limits) {
  if (size > max_frame_bytes(limits))
    return make_error(errc::payload_too_large,
                      "message of " + size_text(size) + " exceeds " + limit_text(limits)
                        + " (plus " + size_text(limits.header_slack_bytes) + " for headers)");
  if (size == 0 || size % word_size != 0)
    return make_error(errc::malformed_message, "message of " + std::to_string(size)
                      + " bytes is not a whole number of 8-byte words");
  return caf::none;
}

/// The error that a sender put in place of the message it could not send.
caf::error read_refusal(wire::Refusal::Reader r) {
  auto code = r.getCode();
  auto text = string_of(r.getText());
  bool known = code > 0 && code <= static_cast<uint8_t>(errc::interrupted);
  if (!known)
    return make_error(errc::malformed_message,
                      "refusal with unknown code " + std::to_string(code) + ": " + text);
  // The text already starts with the code's name (it came from describe()).
  auto prefix = to_string(static_cast<errc>(code)) + ": ";
  if (text.compare(0, prefix.size(), prefix) == 0)
    text.erase(0, prefix.size());
  return make_error(static_cast<errc>(code), "refused by the sender: " + text);
}

template <class T>
caf::expected<T> read_envelope(wire::Envelope::Reader envelope, decoder& d) {
  auto version = envelope.getVersion();
  if (version != schema_version)
    return make_error(errc::unknown_schema_version,
                      "message has schema version " + std::to_string(version)
                        + ", this build reads version " + std::to_string(schema_version));
  auto body = envelope.getBody();
  if (body.which() == wire::Envelope::Body::REFUSED)
    return read_refusal(body.getRefused());
  if (body.which() != wire_kind<T>::which)
    return make_error(errc::malformed_message, std::string{"expected a "} + wire_kind<T>::name
                      + ", got a " + kind_text(body.which()));
  T result;
  if (auto err = read_fields(d, wire_kind<T>::get(body), result))
    return err;
  return result;
}

/// Decodes whole words; never throws. `owner` holds `words`, or is null when
/// they are borrowed (see decoder).
template <class T>
caf::expected<T> decode_words(kj::ArrayPtr<const capnp::word> words, const codec_limits& limits,
                              shared_words owner) {
  try {
    capnp::ReaderOptions options;
    // Sized to the message (capnp's default stops at 64 MiB); the factor
    // leaves room for getters that count the same struct twice. It would also
    // let a list of zero-sized structs claim 4 entries a word: the decoder
    // bounds every list by the size of the message instead (fields.cpp).
    options.traversalLimitInWords = words.size() * 4 + 1024;
    capnp::FlatArrayMessageReader reader{words, options};
    if (reader.getEnd() != words.end())
      return make_error(errc::malformed_message,
                        std::to_string((words.end() - reader.getEnd()) * word_size)
                          + " bytes follow the end of the message");
    decoder d{limits, std::move(owner), words.size()};
    return read_envelope<T>(reader.getRoot<wire::Envelope>(), d);
  } catch (const kj::Exception& ex) {
    return make_error(errc::malformed_message, std::string{"not a valid "} + wire_kind<T>::name
                      + " message: " + ex.getDescription().cStr());
  } catch (const std::exception& ex) {
    return make_error(errc::malformed_message, std::string{"cannot decode a "}
                      + wire_kind<T>::name + ": " + ex.what());
  }
}

// -- CAF serialization ---------------------------------------------------------

template <class T>
caf::error save(caf::serializer& f, const T& x) {
  crossing_scope serialising{crossing_part::serialisation};
  // Whatever cannot be encoded travels as a refusal: CAF 0.17 would otherwise
  // send a truncated message that the receiver drops without a word.
  outgoing_ptr out;
  if (x.invalid)
    out = build_refusal(x.invalid);
  else if (auto built = build(x, process_limits()))
    out = std::move(*built);
  else
    out = build_refusal(built.error());
  auto size = static_cast<uint32_t>(out->size_bytes);
  if (auto err = f(size))
    return err;
  return write_flat(*out, [&f](const void* data, size_t bytes) {
    return f.apply_raw(bytes, const_cast<void*>(data));
  });
}

/// Consumes `size` bytes of `f` without keeping them.
caf::error skip(caf::deserializer& f, uint32_t size) {
  if (auto binary = dynamic_cast<caf::binary_deserializer*>(&f)) {
    binary->skip(size);
    return caf::none;
  }
  std::array<char, 65536> chunk;
  while (size > 0) {
    auto n = std::min<uint32_t>(size, chunk.size());
    if (auto err = f.apply_raw(n, chunk.data()))
      return err;
    size -= n;
  }
  return caf::none;
}

/// Replaces `x` by a struct that only says why it could not be read.
template <class T>
void set_invalid(T& x, caf::error reason) {
  x = T{};
  x.invalid = std::move(reason);
}

template <class T>
caf::error load(caf::deserializer& f, T& x) {
  crossing_scope serialising{crossing_part::serialisation};
  const auto limits = process_limits();
  uint32_t size = 0;
  if (auto err = f(size))
    return err;
  // A length beyond the CAF message breaks the stream itself: that alone is
  // an error for CAF (and checking it first avoids a useless allocation).
  if (auto binary = dynamic_cast<caf::binary_deserializer*>(&f))
    if (size > binary->remaining())
      return caf::sec::end_of_stream;
  auto refusal = check_frame(size, limits);
  auto buffer = refusal ? nullptr : make_words(size);
  if (!refusal && buffer == nullptr)
    refusal = out_of_memory(size);
  if (refusal) {
    set_invalid(x, std::move(refusal));
    return skip(f, size);
  }
  if (auto err = f.apply_raw(size, buffer.get()))
    return err;
  auto words = kj::arrayPtr(reinterpret_cast<const capnp::word*>(buffer.get()),
                            size / word_size);
  auto result = decode_words<T>(words, limits, buffer);
  if (result)
    x = std::move(*result);
  else
    set_invalid(x, std::move(result.error()));
  return caf::none;
}

} // namespace

// -- public API ------------------------------------------------------------------

void use_shared_memory(bool on) {
  if (on == shared_memory.exchange(on))
    return;
  if (on)
    detail::start_slabs();
  else
    detail::stop_slabs();
}

bool shared_memory_in_use() {
  return shared_memory.load(std::memory_order_relaxed);
}

at::Tensor empty_for_sending(int64_t numel) {
  if (static_cast<uint64_t>(numel) * sizeof(float) >= detail::shared_memory_threshold &&
      shared_memory_in_use())
    if (auto t = detail::slab_tensor(numel); t.defined())
      return t;
  return at::empty({numel});
}

template <class T>
caf::expected<T> decode(const char* bytes, size_t size, const codec_limits& limits) {
  if (auto err = check_frame(size, limits))
    return err;
  if (reinterpret_cast<uintptr_t>(bytes) % word_size == 0) {
    auto words = kj::arrayPtr(reinterpret_cast<const capnp::word*>(bytes), size / word_size);
    return decode_words<T>(words, limits, nullptr);
  }
  // Misaligned input: copy it once into words that the tensors then share.
  auto buffer = make_words(size);
  if (buffer == nullptr)
    return out_of_memory(size);
  std::memcpy(buffer.get(), bytes, size);
  auto words = kj::arrayPtr(reinterpret_cast<const capnp::word*>(buffer.get()),
                            size / word_size);
  return decode_words<T>(words, limits, buffer);
}

#define BATON_DEFINE_CODEC(type)                                               \
  caf::expected<wire_bytes> encode(const type& x, const codec_limits& limits) { \
    return encode_as(x, limits);                                               \
  }                                                                            \
  template caf::expected<type> decode<type>(const char*, size_t,               \
                                            const codec_limits&);              \
  caf::error inspect(caf::serializer& f, type& x) {                            \
    return save(f, x);                                                         \
  }                                                                            \
  caf::error inspect(caf::deserializer& f, type& x) {                          \
    return load(f, x);                                                         \
  }

BATON_DEFINE_CODEC(microbatch)
BATON_DEFINE_CODEC(gradient)
BATON_DEFINE_CODEC(tensor_set)
BATON_DEFINE_CODEC(credit)
BATON_DEFINE_CODEC(control)
BATON_DEFINE_CODEC(actor_report)
BATON_DEFINE_CODEC(node_report)
BATON_DEFINE_CODEC(spawn_request)
BATON_DEFINE_CODEC(progress)

#undef BATON_DEFINE_CODEC

int64_t payload_bytes(const microbatch& x) {
  int64_t total = x.payload.defined() ? static_cast<int64_t>(x.payload.nbytes()) : 0;
  if (x.boundary_input.defined())
    total += static_cast<int64_t>(x.boundary_input.nbytes());
  for (const auto& task : x.labels)
    if (task.values.defined())
      total += static_cast<int64_t>(task.values.nbytes());
  return total;
}

} // namespace baton::messages
