// The codecs of messages/codec.hpp within one process: round trips of every
// struct (bit for bit), every kind of bad input as an error value, the size
// limit, CAF's serializer path (and the CPU it counts), and fuzz loops over corrupted microbatches and
// tensor sets.

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/make_message.hpp>
#include <capnp/any.h>

#include "messages/codec.hpp"
#include "messages/crossing_cpu.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/message_testing.hpp"

using namespace baton;
using namespace baton::messages;
using namespace baton::messages::testing;

namespace {

constexpr uint64_t mib = uint64_t{1} << 20;

const wire_patcher& patcher() {
  static const wire_patcher instance;
  return instance;
}

template <class T>
T round_trip(const T& x, const codec_limits& limits = {}) {
  auto bytes = encode(x, limits);
  EXPECT_TRUE(bytes) << describe(bytes.error());
  if (!bytes)
    return T{};
  auto y = decode<T>(*bytes, limits);
  EXPECT_TRUE(y) << describe(y.error());
  return y ? std::move(*y) : T{};
}

wire_bytes encoded(const microbatch& x) {
  auto bytes = encode(x);
  EXPECT_TRUE(bytes) << describe(bytes.error());
  return bytes ? std::move(*bytes) : wire_bytes{};
}

/// Encodes the sample microbatch after `edit` changed its envelope.
wire_bytes patched(const std::function<void(capnp::DynamicStruct::Builder)>& edit) {
  return patcher().patch(encoded(sample(tag<microbatch>{})), edit);
}

/// Encodes the sample tensor set after `edit` changed its envelope.
wire_bytes patched_set(const std::function<void(capnp::DynamicStruct::Builder)>& edit) {
  auto bytes = encode(sample(tag<tensor_set>{}));
  EXPECT_TRUE(bytes) << describe(bytes.error());
  return patcher().patch(bytes ? *bytes : wire_bytes{}, edit);
}

/// Tensor `index` of the tensor set in `envelope`.
capnp::DynamicStruct::Builder set_tensor_of(capnp::DynamicStruct::Builder envelope,
                                            unsigned index) {
  auto tensors = wire_patcher::body(envelope, "tensorSet").get("tensors").as<capnp::DynamicList>();
  return tensors[index].as<capnp::DynamicStruct>().get("value").as<capnp::DynamicStruct>();
}

capnp::DynamicStruct::Builder payload_of(capnp::DynamicStruct::Builder envelope) {
  return wire_patcher::body(envelope, "microbatch").get("payload").as<capnp::DynamicStruct>();
}

/// Expects decoding `bytes` as T to fail with `code`; returns the description.
template <class T = microbatch>
std::string expect_refused(const wire_bytes& bytes, errc code, const codec_limits& limits = {}) {
  auto result = decode<T>(bytes, limits);
  EXPECT_FALSE(result) << "decoded although it should have failed with " << to_string(code);
  if (result)
    return {};
  EXPECT_TRUE(is(result.error(), code)) << describe(result.error());
  return describe(result.error());
}

/// A list of the envelope's body member and how many entries it claims.
struct claimed_list {
  const char* field;
  unsigned count;
};

/// `bytes` with each list of `lists` (fields of the body member `member`)
/// replaced by zero-sized structs: no bytes on the wire, which Cap'n Proto
/// accepts within its traversal limit (one word an entry) as a hostile peer
/// could send them.
wire_bytes with_empty_entries(const wire_bytes& bytes, const char* member,
                              std::vector<claimed_list> lists) {
  return patcher().patch(bytes, [&](capnp::DynamicStruct::Builder envelope) {
    auto body = wire_patcher::body(envelope, member);
    auto pointers = body.as<capnp::AnyStruct>().getPointerSection();
    for (const auto& list : lists) {
      auto slot = body.getSchema().getFieldByName(list.field).getProto().getSlot();
      pointers[slot.getOffset()].initAsListOfAnyStruct(0, 0, list.count);
    }
  });
}

/// Twice as many entries as `bytes` has words: more than a list that we wrote
/// could have (each entry takes a word at least), fewer than capnp's traversal
/// limit of 4 a word lets through.
unsigned too_many_entries(const wire_bytes& bytes) {
  return static_cast<unsigned>(bytes.size() / sizeof(capnp::word) * 2);
}

// -- CAF serialization helpers --------------------------------------------------

/// `bytes` as CAF carries them in a frame: a 32-bit size, then the bytes.
void caf_frame(const wire_bytes& bytes, std::vector<char>& frame) {
  caf::binary_serializer sink{nullptr, frame};
  ASSERT_FALSE(sink(static_cast<uint32_t>(bytes.size())));
  // CAF 0.17's apply_raw takes a pointer to non-const; a serializer only reads.
  ASSERT_FALSE(sink.apply_raw(bytes.size(), const_cast<char*>(bytes.data())));
}

template <class T>
std::vector<char> caf_serialize(T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto err = inspect(sink, x);
  EXPECT_FALSE(err) << describe(err);
  return buf;
}

template <class T>
T caf_deserialize(const std::vector<char>& buf) {
  T x;
  caf::binary_deserializer source{nullptr, buf};
  auto err = inspect(source, x);
  EXPECT_FALSE(err) << describe(err);
  EXPECT_EQ(source.remaining(), 0u);
  return x;
}

// -- fuzzing helpers -------------------------------------------------------------

/// Flips 1 to 8 random bytes of `bytes` and, one time in four, cuts it to a
/// random length.
void corrupt(wire_bytes& bytes, std::mt19937& rng) {
  auto flips = 1 + rng() % 8;
  for (unsigned i = 0; i < flips; ++i)
    bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
  if (rng() % 4 == 0)
    bytes.resize(rng() % bytes.size());
}

/// Expects a decoded tensor to be consistent and readable in full (an
/// undefined one is fine).
void expect_readable(const at::Tensor& t) {
  if (!t.defined())
    return;
  EXPECT_EQ(t.nbytes(), static_cast<size_t>(t.numel()) * t.element_size());
  if (t.numel() > 0)
    (void) t.to(at::kDouble).sum().item<double>();
}

} // namespace

// -- round trips -----------------------------------------------------------------

TEST(codec, microbatch_round_trips_for_every_dtype) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kByte, at::kInt, at::kChar,
                     at::kHalf, at::kBFloat16, at::kBool, at::kShort}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto x = sample(tag<microbatch>{}, dtype);
    expect_same(x, round_trip(x));
  }
}

TEST(codec, float_special_values_survive_bit_for_bit) {
  auto x = sample(tag<microbatch>{});
  float nan_with_payload;
  uint32_t bits = 0x7fc01234;
  std::memcpy(&nan_with_payload, &bits, sizeof(bits));
  x.payload = at::tensor({nan_with_payload, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(), 1.0f});
  auto y = round_trip(x);
  EXPECT_TRUE(bit_equal(x.payload, y.payload));
}

TEST(codec, non_contiguous_payload_round_trips) {
  auto x = sample(tag<microbatch>{});
  x.payload = pattern({64, 48}, at::kFloat).t().slice(0, 0, 48, 2);
  ASSERT_FALSE(x.payload.is_contiguous());
  auto y = round_trip(x);
  expect_same(x, y);
  EXPECT_TRUE(y.payload.is_contiguous());
}

TEST(codec, misaligned_view_round_trips) {
  // A contiguous view starting 3 bytes into its storage: too large to copy
  // cheaply, not word-aligned, so the encoder must not reference it.
  auto base = pattern({10000}, at::kByte);
  auto x = sample(tag<microbatch>{});
  x.payload = base.slice(0, 3, 9003);
  ASSERT_TRUE(x.payload.is_contiguous());
  ASSERT_NE(reinterpret_cast<uintptr_t>(x.payload.data_ptr()) % 8, 0u);
  expect_same(x, round_trip(x));
}

TEST(codec, large_tensor_of_odd_byte_size_round_trips) {
  // 4100 bytes: referenced by the message, not a whole number of words.
  auto x = sample(tag<microbatch>{});
  x.payload = pattern({1025}, at::kFloat);
  auto bytes = encoded(x);
  EXPECT_EQ(bytes.size() % 8, 0u);
  auto y = decode<microbatch>(bytes);
  ASSERT_TRUE(y) << describe(y.error());
  expect_same(x, *y);
}

TEST(codec, empty_scalar_and_undefined_tensors_round_trip) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::empty({0, 5}, at::kFloat);
  x.labels = {{"scalar", at::scalar_tensor(7, at::kLong)}, {"no labels", at::Tensor{}}, {"", at::empty({0}, at::kLong)}};
  auto y = round_trip(x);
  expect_same(x, y);
  EXPECT_EQ(y.payload.sizes(), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(y.labels[0].values.dim(), 0);
  EXPECT_FALSE(y.labels[1].values.defined());
  auto g = sample(tag<gradient>{});
  g.value = at::Tensor{};
  EXPECT_FALSE(round_trip(g).value.defined());
  microbatch none;
  expect_same(none, round_trip(none));
}

TEST(codec, sample_ids_round_trip) {
  auto x = sample_with_ids();
  expect_same(x, round_trip(x));
  auto y = caf_deserialize<microbatch>(caf_serialize(x));
  expect_same(x, y);
  EXPECT_EQ(y.samples, (std::vector<int64_t>{59999, 0, 17, 3}));
  // No ids: not cut from a data set, still valid.
  EXPECT_TRUE(round_trip(sample(tag<microbatch>{})).samples.empty());
}

TEST(codec, gradient_round_trips) {
  auto x = sample(tag<gradient>{});
  expect_same(x, round_trip(x));
}

// weight_gradient: next: a microbatch carries the input of the previous
// stage's last layer, a gradient that layer's weight gradients back.
TEST(codec, a_boundary_input_and_weight_gradients_round_trip) {
  auto m = sample(tag<microbatch>{});
  m.boundary_input = pattern({4, 32, 14, 14}, at::kFloat);
  auto y = round_trip(m);
  expect_same(m, y);
  EXPECT_EQ(y.boundary_input.sizes(), m.boundary_input.sizes());
  EXPECT_EQ(payload_bytes(m), payload_bytes(sample(tag<microbatch>{})) +
                                static_cast<int64_t>(m.boundary_input.nbytes()));
  auto g = sample(tag<gradient>{});
  g.weight_gradients = {pattern({64, 32, 3, 3}, at::kFloat), pattern({64}, at::kFloat)};
  auto h = round_trip(g);
  expect_same(g, h);
  EXPECT_EQ(h.weight_gradients.size(), 2u);
}

TEST(codec, tensor_set_round_trips_tensors_of_any_dtype_and_shape) {
  auto x = sample(tag<tensor_set>{});
  auto y = round_trip(x);
  expect_same(x, y);
  EXPECT_FALSE(y.tensors[5].defined());
  EXPECT_EQ(y.tensors[3].dim(), 0);
  EXPECT_EQ(y.tensors[4].sizes(), (std::vector<int64_t>{0, 8}));
}

TEST(codec, tensor_set_round_trips_one_tensor_of_every_dtype) {
  tensor_set x;
  x.kind = "weights";
  x.from = "stage-1";
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kByte, at::kInt, at::kChar,
                     at::kHalf, at::kBFloat16, at::kBool, at::kShort})
    x.tensors.push_back(pattern({17, 3}, dtype));
  // A non-contiguous view: sent as its dense copy.
  x.tensors.push_back(pattern({64, 48}, at::kFloat).t().slice(0, 0, 48, 2));
  auto y = round_trip(x);
  expect_same(x, y);
  EXPECT_TRUE(y.tensors.back().is_contiguous());
}

TEST(codec, empty_tensor_set_round_trips) {
  tensor_set x;
  x.kind = "gradients";
  x.from = "head-all";
  x.step = 3;
  expect_same(x, round_trip(x));
  tensor_set none;
  expect_same(none, round_trip(none));
}

TEST(codec, credit_round_trips) {
  auto x = sample(tag<credit>{});
  expect_same(x, round_trip(x));
}

TEST(codec, control_round_trips_for_every_kind) {
  for (auto kind : {control_kind::start, control_kind::epoch_end, control_kind::end_of_stream,
                    control_kind::shutdown}) {
    auto x = sample(tag<control>{});
    x.kind = kind;
    expect_same(x, round_trip(x));
  }
}

TEST(codec, actor_report_round_trips) {
  auto x = sample(tag<actor_report>{});
  expect_same(x, round_trip(x));
  x.trace.clear();
  x.bubble_seconds = 0;
  expect_same(x, round_trip(x));
}

TEST(codec, actor_report_with_a_long_trace_round_trips) {
  auto x = sample(tag<actor_report>{});
  const char* kinds[] = {"forward", "backward", "step", "send", "wait", "eval", "allreduce"};
  x.trace.clear();
  for (int64_t i = 0; i < 100000; ++i)
    x.trace.push_back({kinds[i % 7], 1718000000000000 + 37 * i, i % 1000, i / 3, i / 12});
  auto bytes = encode(x);
  ASSERT_TRUE(bytes) << describe(bytes.error());
  EXPECT_LT(bytes->size(), 100000u * 64); // 56 bytes an event, as trace.hpp assumes
  auto y = decode<actor_report>(*bytes);
  ASSERT_TRUE(y) << describe(y.error());
  expect_same(x, *y);
}

TEST(codec, node_report_round_trips) {
  auto x = sample(tag<node_report>{});
  expect_same(x, round_trip(x));
}

TEST(codec, spawn_request_round_trips) {
  auto x = sample(tag<spawn_request>{});
  x.spec += std::string(100000, 'y'); // YAML text of any length
  expect_same(x, round_trip(x));
}

TEST(codec, progress_round_trips) {
  auto x = sample(tag<progress>{});
  expect_same(x, round_trip(x));
}

TEST(codec, decoded_tensors_do_not_alias_the_input) {
  auto x = sample(tag<microbatch>{});
  auto bytes = encoded(x);
  auto y = decode<microbatch>(bytes);
  ASSERT_TRUE(y);
  std::fill(bytes.begin(), bytes.end(), '\0');
  bytes = wire_bytes{};
  expect_same(x, *y);
}

TEST(codec, decode_accepts_misaligned_input) {
  auto x = sample(tag<microbatch>{});
  auto bytes = encoded(x);
  microbatch y;
  {
    std::vector<char> shifted(bytes.size() + 1);
    std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
    auto result = decode<microbatch>(shifted.data() + 1, bytes.size());
    ASSERT_TRUE(result) << describe(result.error());
    y = std::move(*result);
  }
  // The input is gone: the tensors must hold what they need.
  expect_same(x, y);
}

TEST(codec, tensor_of_exactly_the_limit_round_trips) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::full({int64_t{64} << 20}, 7, at::kByte);
  x.payload.index_put_({-1}, 9);
  auto y = round_trip(x);
  EXPECT_TRUE(bit_equal(x.payload, y.payload));
}

TEST(codec, payload_bytes_counts_payload_and_labels) {
  auto x = sample(tag<microbatch>{});
  EXPECT_EQ(payload_bytes(x), 4 * 28 * 28 * 4 + 3 * 4 * 8);
  EXPECT_EQ(payload_bytes(microbatch{}), 0);
}

// -- encode refuses --------------------------------------------------------------

TEST(codec, encode_refuses_a_tensor_one_byte_over_the_limit) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::empty({int64_t{64 << 20} + 1}, at::kByte);
  auto bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::payload_too_large)) << describe(bytes.error());
  auto text = describe(bytes.error());
  EXPECT_NE(text.find("payload_too_large: payload: tensor of 67108865 bytes"), std::string::npos)
    << text;
  EXPECT_NE(text.find("exceeds the 64 MiB limit"), std::string::npos) << text;
}

TEST(codec, encode_refuses_a_message_over_the_limit) {
  // Each tensor fits, but together with the headers the message does not.
  codec_limits limits{1024, 256};
  auto x = sample(tag<microbatch>{});
  x.payload = pattern({250}, at::kFloat);
  x.labels = {{"a", pattern({120}, at::kLong)}};
  auto bytes = encode(x, limits);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::payload_too_large)) << describe(bytes.error());
  EXPECT_NE(describe(bytes.error()).find("message of"), std::string::npos);
}

TEST(codec, encode_refuses_a_tensor_set_with_a_tensor_over_the_limit) {
  auto x = sample(tag<tensor_set>{});
  x.tensors[2] = at::empty({int64_t{64 << 20} + 1}, at::kByte);
  auto bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::payload_too_large)) << describe(bytes.error());
  auto text = describe(bytes.error());
  EXPECT_NE(text.find("gradients[2]: tensor of 67108865 bytes"), std::string::npos) << text;
}

TEST(codec, encode_refuses_a_tensor_set_over_the_message_limit) {
  // Each tensor fits, all of them together do not.
  codec_limits limits{4096, 1024};
  tensor_set x;
  x.kind = "weights";
  for (int i = 0; i < 4; ++i)
    x.tensors.push_back(pattern({1000}, at::kFloat));
  auto bytes = encode(x, limits);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::payload_too_large)) << describe(bytes.error());
  EXPECT_NE(describe(bytes.error()).find("tensor_set: message of"), std::string::npos)
    << describe(bytes.error());
  x.tensors.resize(1);
  expect_same(x, round_trip(x, limits));
}

TEST(codec, encode_refuses_a_tensor_set_with_an_unsupported_tensor) {
  auto x = sample(tag<tensor_set>{});
  x.tensors.push_back(at::zeros({2}, at::kComplexDouble));
  auto bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::unknown_dtype)) << describe(bytes.error());
  EXPECT_NE(describe(bytes.error()).find("gradients[7]"), std::string::npos);
  x.tensors.back() = at::eye(3).to_sparse();
  bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::shape_mismatch)) << describe(bytes.error());
}

TEST(codec, encode_refuses_a_dtype_without_wire_code) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::zeros({2, 2}, at::kComplexFloat);
  auto bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::unknown_dtype)) << describe(bytes.error());
}

TEST(codec, encode_refuses_a_sparse_tensor) {
  auto g = sample(tag<gradient>{});
  g.value = at::eye(3).to_sparse();
  auto bytes = encode(g);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::shape_mismatch)) << describe(bytes.error());
}

// -- decode refuses --------------------------------------------------------------

TEST(codec, decode_refuses_truncated_bytes) {
  auto bytes = encoded(sample(tag<microbatch>{}));
  bytes.resize(bytes.size() / 2 / 8 * 8);
  expect_refused(bytes, errc::malformed_message);
}

TEST(codec, decode_refuses_garbage) {
  std::mt19937 rng{7};
  wire_bytes bytes(4096);
  for (auto& byte : bytes)
    byte = static_cast<char>(rng());
  expect_refused(bytes, errc::malformed_message);
}

TEST(codec, decode_refuses_empty_input) {
  expect_refused(wire_bytes{}, errc::malformed_message);
}

TEST(codec, decode_refuses_a_size_that_is_not_whole_words) {
  auto bytes = encoded(sample(tag<microbatch>{}));
  bytes.push_back('\0');
  expect_refused(bytes, errc::malformed_message);
}

TEST(codec, decode_refuses_trailing_bytes) {
  auto bytes = encoded(sample(tag<microbatch>{}));
  bytes.resize(bytes.size() + 8, '\0');
  auto text = expect_refused(bytes, errc::malformed_message);
  EXPECT_NE(text.find("8 bytes follow"), std::string::npos) << text;
}

TEST(codec, decode_refuses_another_message_kind) {
  auto bytes = encode(sample(tag<gradient>{}));
  ASSERT_TRUE(bytes);
  auto text = expect_refused(*bytes, errc::malformed_message);
  EXPECT_NE(text.find("expected a microbatch, got a gradient"), std::string::npos) << text;
  auto set = encode(sample(tag<tensor_set>{}));
  ASSERT_TRUE(set);
  text = expect_refused<gradient>(*set, errc::malformed_message);
  EXPECT_NE(text.find("expected a gradient, got a tensor_set"), std::string::npos) << text;
}

TEST(codec, decode_refuses_an_unknown_schema_version) {
  auto bytes = patched([](auto envelope) { envelope.set("version", schema_version + 1); });
  auto text = expect_refused(bytes, errc::unknown_schema_version);
  EXPECT_NE(text.find("schema version " + std::to_string(schema_version + 1)), std::string::npos)
    << text;
  // Version 1 had no tensor sets and no traces: its readers would drop them.
  static_assert(schema_version == 4, "baton.capnp's version history needs the new version");
  expect_refused(patched([](auto envelope) { envelope.set("version", 1); }),
                 errc::unknown_schema_version);
  // A message without any version (0) is refused too.
  expect_refused(patched([](auto envelope) { envelope.set("version", 0); }),
                 errc::unknown_schema_version);
}

TEST(codec, decode_refuses_an_unknown_dtype_code) {
  auto bytes = patched([](auto envelope) {
    auto payload = payload_of(envelope);
    payload.set("dtype", wire_patcher::raw_enum(payload, "dtype", 42));
  });
  auto text = expect_refused(bytes, errc::unknown_dtype);
  EXPECT_NE(text.find("dtype code 42"), std::string::npos) << text;
}

TEST(codec, decode_refuses_negative_dimensions) {
  auto bytes = patched([](auto envelope) {
    payload_of(envelope).get("shape").template as<capnp::DynamicList>().set(1, -1);
  });
  auto text = expect_refused(bytes, errc::shape_mismatch);
  EXPECT_NE(text.find("negative"), std::string::npos) << text;
}

TEST(codec, decode_refuses_a_shape_that_does_not_match_the_data) {
  auto bytes = patched([](auto envelope) {
    payload_of(envelope).get("shape").template as<capnp::DynamicList>().set(0, 5);
  });
  auto text = expect_refused(bytes, errc::shape_mismatch);
  EXPECT_NE(text.find("needs 15680 bytes, the data has 12544"), std::string::npos) << text;
}

TEST(codec, decode_refuses_data_shorter_than_the_shape) {
  auto bytes = patched([](auto envelope) {
    auto labels = wire_patcher::body(envelope, "microbatch").get("labels").template as<capnp::DynamicList>();
    auto values = labels[0].template as<capnp::DynamicStruct>().get("values").template as<capnp::DynamicStruct>();
    auto short_data = kj::heapArray<capnp::byte>(8);
    values.set("data", capnp::Data::Reader{short_data.begin(), short_data.size()});
  });
  expect_refused(bytes, errc::shape_mismatch);
}

TEST(codec, decode_refuses_too_many_dimensions) {
  auto bytes = patched([](auto envelope) {
    auto payload = payload_of(envelope);
    auto shape = payload.init("shape", 100).template as<capnp::DynamicList>();
    for (unsigned i = 0; i < 100; ++i)
      shape.set(i, 1);
  });
  expect_refused(bytes, errc::shape_mismatch);
}

TEST(codec, decode_refuses_a_shape_whose_size_overflows) {
  auto bytes = patched([](auto envelope) {
    auto shape = payload_of(envelope).get("shape").template as<capnp::DynamicList>();
    shape.set(0, int64_t{1} << 40);
    shape.set(2, int64_t{1} << 40);
  });
  expect_refused(bytes, errc::payload_too_large);
}

TEST(codec, decode_refuses_a_tensor_over_the_limit) {
  auto bytes = encoded(sample(tag<microbatch>{})); // payload: 12544 bytes
  auto text = expect_refused(bytes, errc::payload_too_large, codec_limits{8192, mib});
  EXPECT_NE(text.find("payload"), std::string::npos) << text;
}

TEST(codec, decode_refuses_a_message_over_the_limit_before_parsing) {
  auto bytes = encoded(sample(tag<microbatch>{}));
  auto text = expect_refused(bytes, errc::payload_too_large, codec_limits{1024, 1024});
  EXPECT_NE(text.find("message of"), std::string::npos) << text;
}

TEST(codec, decode_refuses_an_unknown_control_kind) {
  auto bytes = encode(sample(tag<control>{}));
  ASSERT_TRUE(bytes);
  auto bad = patcher().patch(*bytes, [](auto envelope) {
    auto body = wire_patcher::body(envelope, "control");
    body.set("kind", wire_patcher::raw_enum(body, "kind", 9));
  });
  expect_refused<control>(bad, errc::malformed_message);
}

TEST(codec, decode_refuses_a_tensor_set_with_a_bad_tensor) {
  auto shape = [](unsigned index, unsigned dim, int64_t size) {
    return patched_set([=](auto envelope) {
      set_tensor_of(envelope, index).get("shape").template as<capnp::DynamicList>().set(dim, size);
    });
  };
  auto text = expect_refused<tensor_set>(shape(1, 0, 65), errc::shape_mismatch);
  EXPECT_NE(text.find("gradients[1]: shape [65] of float64 needs 520 bytes, the data has 512"),
            std::string::npos)
    << text;
  text = expect_refused<tensor_set>(shape(0, 1, -1), errc::shape_mismatch);
  EXPECT_NE(text.find("negative"), std::string::npos) << text;
  expect_refused<tensor_set>(shape(0, 0, int64_t{1} << 40), errc::payload_too_large);
  auto dtype = patched_set([](auto envelope) {
    auto tensor = set_tensor_of(envelope, 2);
    tensor.set("dtype", wire_patcher::raw_enum(tensor, "dtype", 77));
  });
  text = expect_refused<tensor_set>(dtype, errc::unknown_dtype);
  EXPECT_NE(text.find("gradients[2]: dtype code 77"), std::string::npos) << text;
  // Limits apply to each tensor of the set (the first one has 64 KiB).
  auto bytes = encode(sample(tag<tensor_set>{}));
  ASSERT_TRUE(bytes);
  text = expect_refused<tensor_set>(*bytes, errc::payload_too_large, codec_limits{32768, mib});
  EXPECT_NE(text.find("gradients[0]"), std::string::npos) << text;
}

TEST(codec, decode_refuses_a_list_longer_than_the_message_can_hold) {
  // Each of these lists would make its decoder build one C++ entry (up to 80
  // bytes) per quarter word of the message.
  auto report = encode(sample(tag<actor_report>{}));
  ASSERT_TRUE(report) << describe(report.error());
  auto count = too_many_entries(*report);
  for (const char* field : {"edges", "epochs", "trace"}) {
    SCOPED_TRACE(field);
    auto bad = with_empty_entries(*report, "actorReport", {{field, count}});
    auto text = expect_refused<actor_report>(bad, errc::malformed_message);
    auto expected = std::string{field} + ": " + std::to_string(count) + " entries need at least";
    EXPECT_NE(text.find(expected), std::string::npos) << text;
  }
  auto mb = encoded(sample(tag<microbatch>{}));
  auto bad_mb = with_empty_entries(mb, "microbatch", {{"labels", too_many_entries(mb)}});
  auto text = expect_refused(bad_mb, errc::malformed_message);
  EXPECT_NE(text.find("labels: "), std::string::npos) << text;
  auto set = encode(sample(tag<tensor_set>{}));
  ASSERT_TRUE(set) << describe(set.error());
  auto bad_set = with_empty_entries(*set, "tensorSet", {{"tensors", too_many_entries(*set)}});
  text = expect_refused<tensor_set>(bad_set, errc::malformed_message);
  EXPECT_NE(text.find("gradients: "), std::string::npos) << text;
  // CAF's path delivers the struct with `invalid` set, and nothing else.
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto bad = with_empty_entries(*report, "actorReport", {{"edges", count}});
  ASSERT_FALSE(sink(static_cast<uint32_t>(bad.size())));
  ASSERT_FALSE(sink.apply_raw(bad.size(), bad.data()));
  actor_report y;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_FALSE(inspect(source, y));
  EXPECT_TRUE(is(y.invalid, errc::malformed_message)) << describe(y.invalid);
  EXPECT_TRUE(y.edges.empty());
}

TEST(codec, decode_refuses_lists_that_together_exceed_the_message) {
  auto x = sample(tag<actor_report>{});
  x.weights_digest = std::string(8000, 'f'); // some room for entries
  auto bytes = encode(x);
  ASSERT_TRUE(bytes) << describe(bytes.error());
  // Edges take 4 words and trace events 5: each list alone fits in the
  // message, both together (9/8 of its words) do not.
  auto count = static_cast<unsigned>(bytes->size() / sizeof(capnp::word) / 8);
  auto edges = decode<actor_report>(with_empty_entries(*bytes, "actorReport", {{"edges", count}}));
  ASSERT_TRUE(edges) << describe(edges.error());
  EXPECT_EQ(edges->edges.size(), count);
  auto trace = decode<actor_report>(with_empty_entries(*bytes, "actorReport", {{"trace", count}}));
  ASSERT_TRUE(trace) << describe(trace.error());
  EXPECT_EQ(trace->trace.size(), count);
  auto both = with_empty_entries(*bytes, "actorReport", {{"edges", count}, {"trace", count}});
  auto text = expect_refused<actor_report>(both, errc::malformed_message);
  EXPECT_NE(text.find("trace: " + std::to_string(count) + " entries"), std::string::npos) << text;
}

TEST(codec, decode_refuses_the_empty_struct_list_regression_input) {
  // fuzz/corpus/messages keeps it for the fuzzer: an actor_report of 7192
  // bytes (a 7000-byte weights digest) whose edges are 3500 zero-sized structs
  // (AnyPointer::initAsListOfAnyStruct(0, 0, 3500)), which capnp reads within
  // the traversal limit of such a message.
  auto path = std::string{BATON_SOURCE_DIR}
              + "/fuzz/corpus/messages/regression-empty-struct-list-amplification";
  std::ifstream in{path, std::ios::binary};
  ASSERT_TRUE(in) << path;
  wire_bytes bytes{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  auto text = expect_refused<actor_report>(bytes, errc::malformed_message);
  EXPECT_NE(text.find("edges: 3500 entries"), std::string::npos) << text;
}

TEST(codec, lists_as_long_as_the_message_can_hold_round_trip) {
  // Undefined tensors take one word an entry, the least of any list: the
  // bound is tight for them.
  tensor_set set;
  set.kind = "gradients";
  set.tensors.resize(200000);
  auto bytes = encode(set);
  ASSERT_TRUE(bytes) << describe(bytes.error());
  EXPECT_LT(bytes->size(), 200000u * 8 + 256);
  expect_same(set, round_trip(set));
  microbatch mb;
  mb.labels.resize(50000);
  mb.labels[49999] = {"all", at::arange(3, at::kLong)};
  expect_same(mb, round_trip(mb));
  // Three lists together: their claims add up within one message.
  auto report = sample(tag<actor_report>{});
  for (int64_t i = 0; i < 50000; ++i) {
    report.edges.push_back({"", "", i, i});
    report.epochs.push_back({static_cast<int32_t>(i), 0.5, 0.25, i});
    report.trace.push_back({"", i, i, i, i});
  }
  expect_same(report, round_trip(report));
}

// -- CAF serialization -----------------------------------------------------------

TEST(codec, caf_serialization_round_trips) {
  auto x = sample(tag<microbatch>{});
  auto buf = caf_serialize(x);
  expect_same(x, caf_deserialize<microbatch>(buf));
  auto report = sample(tag<actor_report>{});
  auto report_buf = caf_serialize(report);
  expect_same(report, caf_deserialize<actor_report>(report_buf));
  auto set = sample(tag<tensor_set>{});
  auto set_buf = caf_serialize(set);
  expect_same(set, caf_deserialize<tensor_set>(set_buf));
}

TEST(codec, caf_serialization_counts_its_cpu_as_serialisation_not_wire) {
  microbatch x = sample(tag<microbatch>{});
  x.payload = at::rand({1024, 1024}); // 4 MiB: copied into CAF's buffer and out
  const auto before = crossing_cpu_so_far();
  auto buf = caf_serialize(x);
  expect_same(x, caf_deserialize<microbatch>(buf));
  const auto after = crossing_cpu_so_far();
  EXPECT_GT(after.serialisation, before.serialisation);
  EXPECT_EQ(after.wire, before.wire) << "no socket was read or written";
}

TEST(codec, caf_serialization_of_a_tensor_set_with_an_oversized_tensor_arrives_invalid) {
  auto x = sample(tag<tensor_set>{});
  x.tensors.push_back(at::empty({int64_t{64 << 20} + 1}, at::kByte));
  auto buf = caf_serialize(x);
  EXPECT_LT(buf.size(), 4096u); // the refusal, not the tensors
  auto y = caf_deserialize<tensor_set>(buf);
  ASSERT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("gradients[7]"), std::string::npos) << describe(y.invalid);
  EXPECT_TRUE(y.tensors.empty());
}

TEST(codec, caf_deserializer_sets_invalid_for_a_corrupted_tensor_set) {
  auto bad = patched_set([](auto envelope) {
    set_tensor_of(envelope, 0).get("shape").template as<capnp::DynamicList>().set(0, 300);
  });
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto size = static_cast<uint32_t>(bad.size());
  ASSERT_FALSE(sink(size));
  ASSERT_FALSE(sink.apply_raw(bad.size(), bad.data()));
  auto y = caf_deserialize<tensor_set>(buf);
  EXPECT_TRUE(is(y.invalid, errc::shape_mismatch)) << describe(y.invalid);
  EXPECT_TRUE(y.tensors.empty());
}

TEST(codec, caf_serialization_sends_a_refusal_for_an_oversized_tensor) {
  auto x = sample(tag<microbatch>{});
  x.payload = at::empty({int64_t{64 << 20} + 1}, at::kByte);
  auto buf = caf_serialize(x);
  EXPECT_LT(buf.size(), 4096u); // the refusal, not the tensor
  auto y = caf_deserialize<microbatch>(buf);
  ASSERT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("refused by the sender"), std::string::npos);
}

TEST(codec, caf_serialization_keeps_invalid) {
  auto x = sample(tag<credit>{});
  x.invalid = make_error(errc::unknown_dtype, "payload: dtype code 42 is unknown");
  auto buf = caf_serialize(x);
  auto y = caf_deserialize<credit>(buf);
  EXPECT_TRUE(is(y.invalid, errc::unknown_dtype)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("dtype code 42"), std::string::npos);
}

TEST(codec, caf_deserializer_sets_invalid_and_keeps_the_stream_in_sync) {
  auto bad = patched([](auto envelope) {
    payload_of(envelope).get("shape").template as<capnp::DynamicList>().set(0, 5);
  });
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto size = static_cast<uint32_t>(bad.size());
  uint32_t marker = 0xba70;
  ASSERT_FALSE(sink(size));
  ASSERT_FALSE(sink.apply_raw(bad.size(), bad.data()));
  ASSERT_FALSE(sink(marker));
  caf::binary_deserializer source{nullptr, buf};
  microbatch y;
  EXPECT_FALSE(inspect(source, y));
  EXPECT_TRUE(is(y.invalid, errc::shape_mismatch)) << describe(y.invalid);
  uint32_t after = 0;
  EXPECT_FALSE(source(after));
  EXPECT_EQ(after, marker);
}

TEST(codec, caf_deserializer_skips_an_oversized_frame) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto size = static_cast<uint32_t>(70 * mib);
  uint32_t marker = 0xba70;
  ASSERT_FALSE(sink(size));
  std::vector<char> zeros(size);
  ASSERT_FALSE(sink.apply_raw(zeros.size(), zeros.data()));
  ASSERT_FALSE(sink(marker));
  caf::binary_deserializer source{nullptr, buf};
  microbatch y;
  EXPECT_FALSE(inspect(source, y));
  EXPECT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
  uint32_t after = 0;
  EXPECT_FALSE(source(after));
  EXPECT_EQ(after, marker);
}

TEST(codec, caf_deserializer_fails_on_a_length_beyond_the_stream) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  uint32_t size = 1024;
  ASSERT_FALSE(sink(size));
  buf.resize(buf.size() + 16, '\0');
  caf::binary_deserializer source{nullptr, buf};
  microbatch y;
  EXPECT_TRUE(inspect(source, y));
}

// -- sample ids ------------------------------------------------------------------

/// The sample microbatch with ids, its samples list replaced by `ids` on the wire.
wire_bytes with_wire_samples(const std::vector<int64_t>& ids) {
  auto bytes = encode(sample_with_ids());
  EXPECT_TRUE(bytes) << describe(bytes.error());
  return patcher().patch(bytes ? *bytes : wire_bytes{}, [&](auto envelope) {
    auto body = wire_patcher::body(envelope, "microbatch");
    auto list = body.init("samples", static_cast<unsigned>(ids.size()))
                  .template as<capnp::DynamicList>();
    for (unsigned i = 0; i < ids.size(); ++i)
      list.set(i, ids[i]);
  });
}

TEST(codec, encode_refuses_sample_ids_that_do_not_match_the_rows) {
  for (std::vector<int64_t> ids : {std::vector<int64_t>{1, 2, 3}, {1, 2, 3, 4, 5}}) {
    auto x = sample(tag<microbatch>{});
    x.samples = ids;
    auto bytes = encode(x);
    ASSERT_FALSE(bytes);
    EXPECT_TRUE(is(bytes.error(), errc::shape_mismatch)) << describe(bytes.error());
  }
  auto x = sample_with_ids();
  x.samples[2] = -5;
  auto bytes = encode(x);
  ASSERT_FALSE(bytes);
  EXPECT_TRUE(is(bytes.error(), errc::malformed_message)) << describe(bytes.error());
  x.payload = at::Tensor{}; // ids without any row
  EXPECT_FALSE(encode(x));
}

TEST(codec, decode_refuses_sample_ids_that_do_not_match_the_rows) {
  auto text = expect_refused(with_wire_samples({1, 2, 3}), errc::shape_mismatch);
  EXPECT_NE(text.find("samples: 3 ids for a payload of 4 rows"), std::string::npos) << text;
  text = expect_refused(with_wire_samples({1, 2, 3, 4, 5, 6, 7, 8}), errc::shape_mismatch);
  EXPECT_NE(text.find("samples: 8 ids"), std::string::npos) << text;
  text = expect_refused(with_wire_samples({1, -2, 3, 4}), errc::malformed_message);
  EXPECT_NE(text.find("sample id -2 is negative"), std::string::npos) << text;
  // The patch itself is sound: four ids decode.
  auto fine = decode<microbatch>(with_wire_samples({4, 3, 2, 1}));
  ASSERT_TRUE(fine) << describe(fine.error());
  EXPECT_EQ(fine->samples, (std::vector<int64_t>{4, 3, 2, 1}));
  // CAF's path delivers the struct with `invalid` set, never a crash.
  auto bad = with_wire_samples({7});
  std::vector<char> frame;
  ASSERT_NO_FATAL_FAILURE(caf_frame(bad, frame));
  microbatch y;
  caf::binary_deserializer source{nullptr, frame};
  EXPECT_FALSE(inspect(source, y));
  EXPECT_TRUE(is(y.invalid, errc::shape_mismatch)) << describe(y.invalid);
}

// -- fuzzing ---------------------------------------------------------------------

TEST(codec, corrupted_microbatches_never_crash_the_decoder) {
  auto x = sample_with_ids();
  x.payload = pattern({4, 1, 16, 16}, at::kFloat); // 4 KiB: a referenced segment
  auto original = encoded(x);
  std::mt19937 rng{20240611};
  int decoded = 0;
  int refused = 0;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = original;
    corrupt(bytes, rng);
    // CAF's path decodes into its own buffer and hands out views of it.
    std::vector<char> frame;
    ASSERT_NO_FATAL_FAILURE(caf_frame(bytes, frame));
    caf::binary_deserializer source{nullptr, frame};
    microbatch via_caf;
    ASSERT_FALSE(inspect(source, via_caf));
    auto result = decode<microbatch>(bytes);
    EXPECT_EQ(static_cast<bool>(result), !via_caf.invalid);
    if (!result) {
      ++refused;
      continue;
    }
    ++decoded;
    // Whatever decoded must be consistent tensors that can be read in full.
    expect_readable(result->payload);
    for (const auto& task : result->labels)
      expect_readable(task.values);
    // Ids decode only as one id >= 0 per payload row (or none).
    if (!result->samples.empty()) {
      ASSERT_TRUE(result->payload.defined());
      EXPECT_EQ(static_cast<int64_t>(result->samples.size()), result->payload.size(0));
      for (int64_t id : result->samples)
        EXPECT_GE(id, 0);
    }
  }
  EXPECT_EQ(decoded + refused, 2000);
  EXPECT_GT(refused, 0);
}

TEST(codec, corrupted_tensor_sets_never_crash_the_decoder) {
  auto original = encode(sample(tag<tensor_set>{}));
  ASSERT_TRUE(original);
  std::mt19937 rng{20240612};
  int refused = 0;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = *original;
    corrupt(bytes, rng);
    std::vector<char> frame;
    ASSERT_NO_FATAL_FAILURE(caf_frame(bytes, frame));
    caf::binary_deserializer source{nullptr, frame};
    tensor_set via_caf;
    ASSERT_FALSE(inspect(source, via_caf));
    auto result = decode<tensor_set>(bytes);
    EXPECT_EQ(static_cast<bool>(result), !via_caf.invalid);
    if (!result) {
      ++refused;
      continue;
    }
    // Whatever decoded must be consistent tensors that can be read in full.
    for (const auto& t : result->tensors)
      expect_readable(t);
  }
  EXPECT_GT(refused, 0);
}

// -- text ------------------------------------------------------------------------

TEST(codec, to_string_summarizes_without_values) {
  auto x = sample(tag<microbatch>{});
  auto text = to_string(x);
  EXPECT_NE(text.find("microbatch(id=42"), std::string::npos) << text;
  EXPECT_NE(text.find("payload=Float[4, 1, 28, 28]"), std::string::npos) << text;
  EXPECT_NE(text.find("labels[footwear]=Long[4]"), std::string::npos) << text;
  x.invalid = make_error(errc::shape_mismatch, "payload: bad");
  EXPECT_EQ(to_string(x), "microbatch(invalid: shape_mismatch: payload: bad)");
  // CAF prints message content through the same overloads.
  auto msg = caf::make_message(sample(tag<credit>{}));
  EXPECT_NE(caf::deep_to_string(msg).find("credit(microbatch=41, slots=3)"), std::string::npos)
    << caf::deep_to_string(msg);
  EXPECT_NE(to_string(sample(tag<control>{})).find("kind=epoch_end"), std::string::npos);
  EXPECT_NE(to_string(sample(tag<spawn_request>{})).find("spec_bytes="), std::string::npos);
  auto set = to_string(sample(tag<tensor_set>{}));
  EXPECT_NE(set.find("tensor_set(kind=\"gradients\", from=\"stage-2-replica-1\", replica=1"),
            std::string::npos)
    << set;
  EXPECT_NE(set.find("tensors=7"), std::string::npos) << set;
  EXPECT_NE(to_string(sample(tag<actor_report>{})).find("trace_events=4"), std::string::npos);
}
