// Large tensors through slabs in /dev/shm between the processes of one host
// (messages/shared_memory.hpp, as codec.cpp's CAF serialization uses it):
// round trips through a slab that is reused, and a receiver that does not
// use shared memory, a message taken twice, a slab cut short or a link in
// the slab's place are refused as errors, never read.

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "tests/messages/message_testing.hpp"

using namespace baton;
using namespace baton::messages;
using namespace baton::messages::testing;
namespace fs = std::filesystem;

namespace {

/// This process's shared files in /dev/shm.
std::vector<fs::path> own_shared_files() {
  const auto prefix = "baton-slab-" + std::to_string(::getpid()) + "-";
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0)
      files.push_back(entry.path());
  return files;
}

/// A tensor set with one 4 MiB tensor (through shared memory when in use)
/// and the small tensors of the sample set (always in the message).
tensor_set large_set() {
  auto x = sample(tag<tensor_set>{});
  x.tensors.push_back(pattern({1024, 1024}, at::kFloat));
  return x;
}

std::vector<char> serialized(tensor_set x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  EXPECT_FALSE(inspect(sink, x));
  return buf;
}

tensor_set deserialized(const std::vector<char>& buf) {
  tensor_set y;
  caf::binary_deserializer source{nullptr, buf};
  EXPECT_FALSE(inspect(source, y));
  return y;
}

class shared_memory : public ::testing::Test {
protected:
  void SetUp() override {
    if (!fs::is_directory("/dev/shm"))
      GTEST_SKIP() << "no /dev/shm on this machine";
    use_shared_memory(true);
  }
  void TearDown() override {
    use_shared_memory(false);
    for (const auto& f : own_shared_files())
      fs::remove(f);
  }
};

} // namespace

TEST_F(shared_memory, a_large_tensor_travels_through_a_slab_that_is_reused) {
  const auto x = large_set();
  const auto buf = serialized(x);
  EXPECT_LT(buf.size(), size_t{1} << 20) << "the 4 MiB tensor is not in the message";
  ASSERT_EQ(own_shared_files().size(), 1u);
  auto y = deserialized(buf);
  ASSERT_FALSE(y.invalid) << describe(y.invalid);
  ASSERT_EQ(y.tensors.size(), x.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i)
    expect_same_tensor(x.tensors[i], y.tensors[i], "tensor");
  // The received tensor is the slab's bytes: while the receiver holds it,
  // the next message takes another slab and leaves it as it was.
  auto second = large_set();
  second.tensors.back().add_(1);
  auto z = deserialized(serialized(second));
  ASSERT_FALSE(z.invalid) << describe(z.invalid);
  expect_same_tensor(second.tensors.back(), z.tensors.back(), "second tensor");
  expect_same_tensor(x.tensors.back(), y.tensors.back(), "first tensor, after the second");
  EXPECT_EQ(own_shared_files().size(), 2u) << "the first slab is the receiver's";
  // Once the receiver lets its tensors go, their slabs serve again.
  y = tensor_set{};
  z = tensor_set{};
  auto third = large_set();
  third.tensors.back().mul_(3);
  const auto w = deserialized(serialized(third));
  ASSERT_FALSE(w.invalid) << describe(w.invalid);
  expect_same_tensor(third.tensors.back(), w.tensors.back(), "third tensor");
  EXPECT_EQ(own_shared_files().size(), 2u) << "a freed slab serves the third message";
}

TEST_F(shared_memory, a_view_of_a_tensor_made_for_sending_travels_without_a_copy) {
  auto bucket = empty_for_sending(int64_t{1} << 20); // 4 MiB, in a slab of this process
  ASSERT_EQ(own_shared_files().size(), 1u);
  bucket.copy_(at::arange(bucket.numel(), at::kFloat));
  auto x = sample(tag<tensor_set>{});
  const auto chunk = bucket.narrow(0, 1000, 300000); // 1.2 MB at an offset into the slab
  x.tensors.push_back(chunk);
  const auto buf = serialized(x);
  EXPECT_LT(buf.size(), size_t{1} << 20) << "the chunk is not in the message";
  EXPECT_EQ(own_shared_files().size(), 1u) << "no slab for a copy";
  auto y = deserialized(buf);
  ASSERT_FALSE(y.invalid) << describe(y.invalid);
  expect_same_tensor(chunk, y.tensors.back(), "chunk");
  bucket.narrow(0, 1000, 1).fill_(-1); // the receiver's tensor is the sender's bytes
  EXPECT_EQ(y.tensors.back()[0].item<float>(), -1.0f);
  const auto again = deserialized(buf);
  EXPECT_TRUE(is(again.invalid, errc::malformed_message)) << describe(again.invalid);
  // Held by the sender's tensor and by the receiver's: the next takes another slab.
  x = tensor_set{};
  auto second = empty_for_sending(int64_t{1} << 20);
  EXPECT_EQ(own_shared_files().size(), 2u);
  // Free once both are gone.
  bucket = at::Tensor{};
  y = tensor_set{};
  second = at::Tensor{};
  auto third = empty_for_sending(int64_t{1} << 20);
  EXPECT_EQ(own_shared_files().size(), 2u) << "a freed slab serves again";
  use_shared_memory(false);
  EXPECT_FALSE(third.data_ptr() == nullptr) << "a tensor of a slab outlives the slabs";
  third.fill_(1);
  EXPECT_EQ(empty_for_sending(int64_t{1} << 20).numel(), int64_t{1} << 20);
  EXPECT_TRUE(own_shared_files().empty()) << "without shared memory: at::empty's";
}

TEST_F(shared_memory, without_it_every_tensor_is_in_the_message) {
  use_shared_memory(false);
  const auto buf = serialized(large_set());
  EXPECT_GT(buf.size(), size_t{4} << 20);
  EXPECT_TRUE(own_shared_files().empty());
}

TEST_F(shared_memory, a_receiver_that_does_not_use_it_refuses_the_tensor) {
  const auto buf = serialized(large_set());
  use_shared_memory(false);
  const auto y = deserialized(buf);
  EXPECT_TRUE(is(y.invalid, errc::malformed_message)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("shared memory"), std::string::npos) << describe(y.invalid);
  EXPECT_TRUE(y.tensors.empty());
}

TEST_F(shared_memory, a_message_taken_twice_or_a_slab_cut_short_is_refused) {
  const auto buf = serialized(large_set());
  ASSERT_FALSE(deserialized(buf).invalid);
  const auto again = deserialized(buf);
  EXPECT_TRUE(is(again.invalid, errc::malformed_message)) << describe(again.invalid);
  EXPECT_NE(describe(again.invalid).find("taken already"), std::string::npos)
    << describe(again.invalid);

  const auto cut = serialized(large_set()); // the same slab, mapped by the receiver
  const auto files = own_shared_files();
  ASSERT_EQ(files.size(), 1u);
  fs::resize_file(files[0], 4096);
  const auto y = deserialized(cut);
  EXPECT_TRUE(is(y.invalid, errc::shape_mismatch)) << describe(y.invalid);
  EXPECT_NE(describe(y.invalid).find("cut short"), std::string::npos) << describe(y.invalid);
}

TEST_F(shared_memory, a_link_in_the_files_place_is_not_followed) {
  const auto buf = serialized(large_set());
  const auto files = own_shared_files();
  ASSERT_EQ(files.size(), 1u);
  const auto victim = files[0].string() + "-victim";
  fs::rename(files[0], victim);
  fs::create_symlink(victim, files[0]);
  const auto y = deserialized(buf);
  EXPECT_TRUE(is(y.invalid, errc::payload_too_large)) << describe(y.invalid);
  EXPECT_TRUE(fs::exists(victim)) << "the link's target is left alone";
  fs::remove(victim);
  fs::remove(files[0]);
}
