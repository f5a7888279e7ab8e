// Large tensors through /dev/shm between the processes of one host
// (messages/shared_memory.hpp, as codec.cpp's CAF serialization uses it):
// round trips, the file goes with the first reader, and a receiver that does
// not use shared memory, a missing file, a file of another size or a link in
// the file's place are refused as errors, never read.

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
  const auto prefix = "baton-tensor-" + std::to_string(::getpid()) + "-";
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

TEST_F(shared_memory, a_large_tensor_travels_as_a_file_that_its_reader_removes) {
  const auto x = large_set();
  const auto buf = serialized(x);
  EXPECT_LT(buf.size(), size_t{1} << 20) << "the 4 MiB tensor is not in the message";
  ASSERT_EQ(own_shared_files().size(), 1u);
  const auto y = deserialized(buf);
  ASSERT_FALSE(y.invalid) << describe(y.invalid);
  ASSERT_EQ(y.tensors.size(), x.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i)
    expect_same_tensor(x.tensors[i], y.tensors[i], "tensor");
  EXPECT_TRUE(own_shared_files().empty()) << "the reader removes the file's name";
  // The received tensor is writable memory of its own.
  auto received = y.tensors.back();
  received.add_(1);
  EXPECT_TRUE(bit_equal(received, x.tensors.back() + 1));
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

TEST_F(shared_memory, a_file_taken_already_or_of_another_size_is_refused) {
  const auto buf = serialized(large_set());
  ASSERT_FALSE(deserialized(buf).invalid);
  const auto again = deserialized(buf);
  EXPECT_TRUE(is(again.invalid, errc::payload_too_large)) << describe(again.invalid);
  EXPECT_NE(describe(again.invalid).find("cannot open its shared memory"), std::string::npos)
    << describe(again.invalid);

  const auto cut = serialized(large_set());
  const auto files = own_shared_files();
  ASSERT_EQ(files.size(), 1u);
  fs::resize_file(files[0], 4096);
  const auto y = deserialized(cut);
  EXPECT_TRUE(is(y.invalid, errc::shape_mismatch)) << describe(y.invalid);
  EXPECT_TRUE(own_shared_files().empty()) << "a refused file is removed too";
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
