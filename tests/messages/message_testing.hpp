#pragma once

// Shared by the suites of tests/messages: sample values of every message type,
// field-by-field comparison, and a patcher that edits encoded messages through
// Cap'n Proto's dynamic API (the schema is parsed from messages/baton.capnp at
// run time, so tests need not include the generated header).

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema-parser.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <kj/filesystem.h>

#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/types.hpp"

namespace baton::messages::testing {

// -- tensors -----------------------------------------------------------------------

/// A deterministic, non-trivial tensor of any dtype (no RNG involved).
inline at::Tensor pattern(std::vector<int64_t> shape, at::ScalarType dtype) {
  int64_t count = 1;
  for (auto dim : shape)
    count *= dim;
  auto values = at::arange(count, at::kDouble).mul(0.731).sin().mul(120);
  if (dtype == at::kByte || dtype == at::kBool)
    values = values.abs();
  return values.to(dtype).reshape(shape);
}

/// Same dtype, same shape and the very same bytes (NaN payloads and signed
/// zeros included, which at::equal alone would not check).
inline bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined())
    return a.defined() == b.defined();
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes())
    return false;
  auto x = a.contiguous();
  auto y = b.contiguous();
  if (x.nbytes() != y.nbytes())
    return false;
  return x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

/// Bit equality plus value equality as LibTorch sees it (NaN-free tensors).
inline void expect_same_tensor(const at::Tensor& a, const at::Tensor& b, const char* what) {
  EXPECT_TRUE(bit_equal(a, b)) << what;
  if (a.defined() && b.defined() && a.sizes() == b.sizes() && a.is_floating_point()
      && !a.isnan().any().item<bool>())
    EXPECT_TRUE(at::equal(a, b)) << what;
}

// -- samples of every message type --------------------------------------------------

template <class T>
struct tag {};

inline microbatch sample(tag<microbatch>, at::ScalarType dtype = at::kFloat) {
  microbatch x;
  x.id = 42;
  x.step = 7;
  x.epoch = 2;
  x.index_in_step = 1;
  x.step_size = 4;
  x.eval = true;
  x.weight_version = 13;
  x.payload = pattern({4, 1, 28, 28}, dtype);
  x.labels = {{"all", at::arange(4, at::kLong) % 10},
              {"footwear", at::tensor({0, 1, 1, 0}, at::kLong)},
              {"groups", at::tensor({3, 0, 2, 1}, at::kLong)}};
  return x;
}

/// The sample microbatch with the data set's sample id of each of its 4 rows.
inline microbatch sample_with_ids() {
  microbatch x = sample(tag<microbatch>{});
  x.samples = {59999, 0, 17, 3};
  return x;
}

inline gradient sample(tag<gradient>) {
  gradient x;
  x.microbatch_id = 42;
  x.step = 7;
  x.weight_version = 12;
  x.value = pattern({4, 256}, at::kFloat);
  return x;
}

inline tensor_set sample(tag<tensor_set>) {
  tensor_set x;
  x.kind = "gradients";
  x.from = "stage-2-replica-1";
  x.replica = 1;
  x.step = 7;
  x.step_size = 4;
  x.tensors = {pattern({256, 64}, at::kFloat), // 64 KiB: referenced by the message
               pattern({64}, at::kDouble),
               pattern({3, 5, 7}, at::kHalf),  // 210 bytes: copied, not whole words
               at::scalar_tensor(5, at::kLong),
               at::empty({0, 8}, at::kBFloat16),
               at::Tensor{},                   // a parameter without gradient
               pattern({2, 3}, at::kBool)};
  return x;
}

inline credit sample(tag<credit>) {
  credit x;
  x.microbatch_id = 41;
  x.slots = 3;
  return x;
}

inline control sample(tag<control>) {
  control x;
  x.kind = control_kind::epoch_end;
  x.epoch = 5;
  x.value = 1234567890123;
  x.text = "all microbatches of epoch 5 were sent";
  return x;
}

inline actor_report sample(tag<actor_report>) {
  actor_report x;
  x.actor = "head-footwear";
  x.role = "head";
  x.task = "footwear";
  x.node = "node-b";
  x.busy_seconds = 12.5;
  x.idle_seconds = 0.25;
  x.samples = 60000;
  x.train_loss = 0.1234567890123;
  x.test_accuracy = 0.9876;
  x.weights_digest = std::string(64, 'f');
  x.edges = {{"stage-1", "head-footwear", 938, 123456789}, {"head-footwear", "stage-1", 938, 4242}};
  x.epochs = {{0, 0.5, 0.81, 60000}, {1, 0.3, 0.87, 60000}};
  x.bubble_seconds = 0.125;
  x.trace = {{"forward", 1718000000123456, 1500, 42, 12},
             {"backward", 1718000000125000, 3100, 42, 12},
             {"step", 1718000000128200, 800, -1, 13},
             {"", 0, 0, -1, -1}};
  x.compute_cpu_seconds = 11.75;
  x.process_cpu_seconds = 12.375;
  x.figures = {{"backward_seconds", 3.5}, {"cache_hits", 59000}, {"", -0.0}};
  x.events = {R"({"step":40,"layer":"pool1"})", "", "not json"};
  return x;
}

inline node_report sample(tag<node_report>) {
  node_report x;
  x.name = "node-b";
  x.peak_rss_bytes = int64_t{3} << 30;
  x.cpu_seconds = 98.75;
  x.cores = 2;
  x.memory_bytes = int64_t{16} << 30;
  return x;
}

inline spawn_request sample(tag<spawn_request>) {
  spawn_request x;
  x.role = "stage";
  x.name = "stage-2";
  x.spec = "layers: [4, 8]\nthreads: 1\nfrozen: true\nname: \"\xc3\xa9t\xc3\xa9\"\n";
  return x;
}

inline progress sample(tag<progress>) {
  progress x;
  x.actor = "head-all";
  x.epoch = 1;
  x.samples = 32000;
  x.loss = 0.4321;
  return x;
}

// -- comparison ---------------------------------------------------------------------

inline void expect_same(const microbatch& a, const microbatch& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.index_in_step, b.index_in_step);
  EXPECT_EQ(a.step_size, b.step_size);
  EXPECT_EQ(a.eval, b.eval);
  EXPECT_EQ(a.weight_version, b.weight_version);
  EXPECT_EQ(a.samples, b.samples);
  expect_same_tensor(a.payload, b.payload, "payload");
  expect_same_tensor(a.boundary_input, b.boundary_input, "boundary input");
  ASSERT_EQ(a.labels.size(), b.labels.size());
  for (size_t i = 0; i < a.labels.size(); ++i) {
    EXPECT_EQ(a.labels[i].task, b.labels[i].task);
    expect_same_tensor(a.labels[i].values, b.labels[i].values, "labels");
  }
}

inline void expect_same(const gradient& a, const gradient& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.microbatch_id, b.microbatch_id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.weight_version, b.weight_version);
  expect_same_tensor(a.value, b.value, "gradient");
  ASSERT_EQ(a.weight_gradients.size(), b.weight_gradients.size());
  for (size_t i = 0; i < a.weight_gradients.size(); ++i)
    expect_same_tensor(a.weight_gradients[i], b.weight_gradients[i], "weight gradient");
}

inline void expect_same(const tensor_set& a, const tensor_set& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.from, b.from);
  EXPECT_EQ(a.replica, b.replica);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.step_size, b.step_size);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    expect_same_tensor(a.tensors[i], b.tensors[i], ("tensors[" + std::to_string(i) + "]").c_str());
}

inline void expect_same(const credit& a, const credit& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.microbatch_id, b.microbatch_id);
  EXPECT_EQ(a.slots, b.slots);
}

inline void expect_same(const control& a, const control& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.text, b.text);
}

inline void expect_same(const actor_report& a, const actor_report& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.actor, b.actor);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.busy_seconds, b.busy_seconds);
  EXPECT_EQ(a.idle_seconds, b.idle_seconds);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.train_loss, b.train_loss);
  EXPECT_EQ(a.test_accuracy, b.test_accuracy);
  EXPECT_EQ(a.weights_digest, b.weights_digest);
  ASSERT_EQ(a.edges.size(), b.edges.size());
  for (size_t i = 0; i < a.edges.size(); ++i) {
    EXPECT_EQ(a.edges[i].from, b.edges[i].from);
    EXPECT_EQ(a.edges[i].to, b.edges[i].to);
    EXPECT_EQ(a.edges[i].messages, b.edges[i].messages);
    EXPECT_EQ(a.edges[i].bytes, b.edges[i].bytes);
  }
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    EXPECT_EQ(a.epochs[i].epoch, b.epochs[i].epoch);
    EXPECT_EQ(a.epochs[i].train_loss, b.epochs[i].train_loss);
    EXPECT_EQ(a.epochs[i].test_accuracy, b.epochs[i].test_accuracy);
    EXPECT_EQ(a.epochs[i].samples, b.epochs[i].samples);
  }
  EXPECT_EQ(a.bubble_seconds, b.bubble_seconds);
  EXPECT_EQ(a.compute_cpu_seconds, b.compute_cpu_seconds);
  EXPECT_EQ(a.process_cpu_seconds, b.process_cpu_seconds);
  ASSERT_EQ(a.trace.size(), b.trace.size());
  for (size_t i = 0; i < a.trace.size(); ++i) {
    EXPECT_EQ(a.trace[i].kind, b.trace[i].kind);
    EXPECT_EQ(a.trace[i].start_us, b.trace[i].start_us);
    EXPECT_EQ(a.trace[i].duration_us, b.trace[i].duration_us);
    EXPECT_EQ(a.trace[i].microbatch_id, b.trace[i].microbatch_id);
    EXPECT_EQ(a.trace[i].weight_version, b.trace[i].weight_version);
  }
  ASSERT_EQ(a.figures.size(), b.figures.size());
  for (size_t i = 0; i < a.figures.size(); ++i) {
    EXPECT_EQ(a.figures[i].name, b.figures[i].name);
    EXPECT_EQ(a.figures[i].value, b.figures[i].value);
  }
  EXPECT_EQ(a.events, b.events);
}

inline void expect_same(const node_report& a, const node_report& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.peak_rss_bytes, b.peak_rss_bytes);
  EXPECT_EQ(a.cpu_seconds, b.cpu_seconds);
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
}

inline void expect_same(const spawn_request& a, const spawn_request& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.spec, b.spec);
}

inline void expect_same(const progress& a, const progress& b) {
  EXPECT_FALSE(b.invalid) << describe(b.invalid);
  EXPECT_EQ(a.actor, b.actor);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.loss, b.loss);
}

/// True when `err` is a baton error with code `code`.
inline bool is(const caf::error& err, errc code) {
  return err && err == code;
}

// -- editing encoded messages -------------------------------------------------------

/// Parses messages/baton.capnp and rewrites encoded messages field by field,
/// the way a buggy or hostile peer could.
class wire_patcher {
public:
  wire_patcher() : fs_(kj::newDiskFilesystem()) {
    auto& root = fs_->getRoot();
    // kj paths are relative to the root: drop the leading '/'.
    include_dir_ = root.openSubdir(kj::Path::parse("usr/include"));
    const kj::ReadableDirectory* const imports[] = {include_dir_.get()};
    auto source = std::string{BATON_SOURCE_DIR}.substr(1) + "/messages/baton.capnp";
    auto file = parser_.parseFromDirectory(root, kj::Path::parse(source.c_str()), imports);
    envelope_ = file.getNested("Envelope").asStruct();
  }

  /// Decodes `bytes` dynamically, lets `edit` change the envelope, re-encodes.
  wire_bytes patch(const wire_bytes& bytes,
                   const std::function<void(capnp::DynamicStruct::Builder)>& edit) const {
    std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.data(), bytes.data(), bytes.size());
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() * 4 + 1024;
    capnp::FlatArrayMessageReader reader{kj::arrayPtr(words.data(), words.size()), options};
    capnp::MallocMessageBuilder builder;
    builder.setRoot(reader.getRoot<capnp::DynamicStruct>(envelope_));
    edit(builder.getRoot<capnp::DynamicStruct>(envelope_));
    auto flat = capnp::messageToFlatArray(builder);
    auto flat_bytes = flat.asChars();
    return wire_bytes(flat_bytes.begin(), flat_bytes.end());
  }

  /// The struct `member` of the envelope's body union (e.g. "microbatch").
  static capnp::DynamicStruct::Builder body(capnp::DynamicStruct::Builder envelope,
                                            const char* member) {
    return envelope.get("body").as<capnp::DynamicStruct>().get(member).as<capnp::DynamicStruct>();
  }

  /// An enumerant of `field`'s enum type with any raw code, known or not.
  static capnp::DynamicEnum raw_enum(capnp::DynamicStruct::Builder s, const char* field,
                                     uint16_t code) {
    auto schema = s.getSchema().getFieldByName(field).getType().asEnum();
    return capnp::DynamicEnum{schema, code};
  }

private:
  kj::Own<kj::Filesystem> fs_;
  kj::Own<const kj::ReadableDirectory> include_dir_;
  capnp::SchemaParser parser_;
  capnp::StructSchema envelope_;
};

} // namespace baton::messages::testing
