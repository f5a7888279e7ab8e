// A small file read whole, with a bound (model/core/bounded_file.hpp): a
// regular file up to its bound, and every other kind refused in words that
// name the file's kind, before a byte is read.

#include "model/core/bounded_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.hpp"

using baton::model::read_bounded_file;
using baton::testing::scratch_dir;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream{path, std::ios::binary} << text;
}

} // namespace

TEST(bounded_file, a_regular_file_up_to_its_bound_is_read_whole) {
  scratch_dir dir{"bounded-file"};
  const auto path = dir.path() + "/record.json";
  write_file(path, std::string(1024, 'x'));
  std::string text = "left over";
  EXPECT_EQ(read_bounded_file(path, text, 1024, "a run record"), "");
  EXPECT_EQ(text, std::string(1024, 'x'));
  write_file(path, "");
  EXPECT_EQ(read_bounded_file(path, text, 1024, "a run record"), "");
  EXPECT_EQ(text, "");
}

TEST(bounded_file, one_byte_over_its_bound_is_refused_naming_the_file_s_kind) {
  scratch_dir dir{"bounded-file"};
  const auto path = dir.path() + "/profile.json";
  write_file(path, std::string(1025, 'x'));
  std::string text;
  EXPECT_EQ(read_bounded_file(path, text, 1024, "a profile"),
            "1025 bytes, more than the 1024 (1 KiB) a profile may have");
  write_file(path, std::string((size_t{1} << 20) + 1, 'x'));
  EXPECT_EQ(read_bounded_file(path, text, size_t{1} << 20, "an epoch record"),
            "1048577 bytes, more than the 1048576 (1 MiB) an epoch record may have");
}

TEST(bounded_file, what_is_not_a_regular_file_is_refused_unread) {
  scratch_dir dir{"bounded-file"};
  std::string text;
  EXPECT_EQ(read_bounded_file(dir.path() + "/absent.yaml", text, 1024, "a config file"),
            "No such file or directory");
  EXPECT_EQ(read_bounded_file(dir.path(), text, 1024, "a config file"),
            "not a regular file (a directory)");
  EXPECT_EQ(read_bounded_file("/dev/zero", text, 1024, "a config file"),
            "not a regular file (a character device)");
  // A FIFO with no writer: opened without blocking, refused.
  const auto fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_bounded_file(fifo, text, 1024, "a report's input"),
            "not a regular file (a FIFO or pipe)");
}
