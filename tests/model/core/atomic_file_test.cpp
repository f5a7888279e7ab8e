// Writing files all or nothing (issue 21, item 6): a write that fails (a
// file-size limit stands in for a full disk: write() fails the same way,
// with EFBIG instead of ENOSPC) is an error naming the file and the cause,
// leaves no temporary file and keeps the previous file. Before, a model
// saved to a full disk killed the process (SIGABRT from LibTorch's archive
// writer) and left PATH.tmp.<pid>.

#include "model/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/training_checkpoint.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

namespace fs = std::filesystem;
using baton::testing::read_text;
using baton::testing::scratch_dir;
using namespace baton::model;

namespace {

/// Limits the size of files this process writes (RLIMIT_FSIZE) with SIGXFSZ
/// ignored, so that a write beyond it fails with EFBIG; restores both.
class file_size_limit {
public:
  explicit file_size_limit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

class atomic_file : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  /// The names in the directory (to see that no temporary file is left).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  scratch_dir scratch_{"atomic-file"};
  const std::string dir_ = scratch_.path();
};

} // namespace

TEST_F(atomic_file, replaces_the_file_and_leaves_nothing_else) {
  EXPECT_EQ(try_replace_file(path("f"), "first"), "");
  EXPECT_EQ(try_replace_file(path("f"), "second"), "");
  EXPECT_EQ(read_text(path("f")), "second");
  EXPECT_EQ(try_replace_file(path("key"), "secret", 0600), "");
  struct stat st {};
  ASSERT_EQ(::stat(path("key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(entries(), (std::vector<std::string>{"f", "key"}));
}

TEST_F(atomic_file, a_failed_write_names_the_file_and_keeps_the_previous_one) {
  replace_file(path("f"), "previous");
  std::string why;
  {
    file_size_limit limit{4096};
    why = try_replace_file(path("f"), std::string(64 * 1024, 'x'));
  }
  EXPECT_NE(why.find("cannot write '" + path("f") + "'"), std::string::npos) << why;
  EXPECT_NE(why.find(std::strerror(EFBIG)), std::string::npos) << why;
  EXPECT_NE(why.find("previous"), std::string::npos) << why;
  EXPECT_EQ(read_text(path("f")), "previous");
  EXPECT_EQ(entries(), (std::vector<std::string>{"f"}));
}

TEST_F(atomic_file, a_directory_that_cannot_hold_the_file_is_an_error) {
  replace_file(path("file"), "x");
  // The parent "directory" is a regular file: refused for root as well,
  // which a chmod'ed directory would not be.
  auto why = try_replace_file(path("file/f"), "y");
  EXPECT_NE(why.find(path("file/f")), std::string::npos) << why;
  EXPECT_NE(why.find(std::strerror(ENOTDIR)), std::string::npos) << why;
  EXPECT_THROW(replace_file(path("file/f"), "y"), file_error);
  EXPECT_NE(try_check_writable(path("file/f")), "");
  EXPECT_EQ(try_check_writable(path("new/dir/f")), "");
  EXPECT_TRUE(fs::is_directory(path("new/dir")));
  EXPECT_TRUE(fs::is_empty(path("new/dir")));
}

// The crash of the issue: the model's archive written straight to a file
// that fills up. Now an error naming the file; the previous model loads.
TEST_F(atomic_file, a_model_that_does_not_fit_is_an_error_and_the_old_model_stays) {
  model_spec spec;
  spec.name = "convnet";
  spec.seed = 1;
  auto saved = make_model(spec);
  save_checkpoint(saved, path("model.pt"));
  const auto size = fs::file_size(path("model.pt"));
  spec.seed = 2;
  try {
    file_size_limit limit{size / 2};
    save_checkpoint(make_model(spec), path("model.pt"));
    ADD_FAILURE() << "expected model::file_error";
  } catch (const file_error& e) {
    EXPECT_NE(std::string(e.what()).find(path("model.pt")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(EFBIG)), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"model.pt"}));
  auto loaded = make_model(spec);
  load_checkpoint(loaded, path("model.pt"));
  EXPECT_EQ(weights_digest(loaded), weights_digest(saved));
}

TEST_F(atomic_file, a_training_checkpoint_that_does_not_fit_keeps_the_older_ones) {
  checkpoint_store store{path("ckpt")};
  training_state s;
  s.tensors.emplace_back("w", torch::ones({64, 64}));
  s.version = 2;
  store.save(s);
  s.version = 4;
  s.tensors[0].second = torch::zeros({256, 256});
  {
    file_size_limit limit{16 * 1024};
    EXPECT_THROW(store.save(s), file_error);
  }
  EXPECT_EQ(store.valid_steps(), (std::vector<int64_t>{2}));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path("ckpt")))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{fs::path(store.path_of(2)).filename().string()}));
}

// Issue 32 item 2: a symbolic link in a file's place (put there by anyone
// who may write in its directory) is never written through nor replaced:
// the write is refused naming the link, and neither the file it points to
// nor a file where a dangling one points is touched.
TEST_F(atomic_file, a_symbolic_link_in_the_files_place_is_refused) {
  ASSERT_EQ(try_replace_file(path("victim"), "precious"), "");
  fs::create_symlink(path("victim"), path("out"));
  auto why = try_replace_file(path("out"), "new");
  EXPECT_TRUE(baton::testing::contains(why, "cannot write '" + path("out") +
                                              "': it is a symbolic link (to '" +
                                              path("victim") + "')"))
    << why;
  EXPECT_TRUE(fs::is_symlink(path("out")));
  EXPECT_EQ(read_text(path("victim")), "precious");
  EXPECT_NE(try_check_writable(path("out")), "");

  fs::create_symlink(path("nowhere"), path("dangling"));
  EXPECT_NE(try_replace_file(path("dangling"), "new"), "");
  EXPECT_FALSE(fs::exists(path("nowhere")));
  // A training checkpoint is written the same way.
  fs::create_directory(path("ckpt"));
  checkpoint_store store{path("ckpt")};
  fs::create_symlink(path("victim"), store.path_of(4));
  training_state s;
  s.tensors.emplace_back("w", torch::ones({2, 2}));
  s.version = 4;
  EXPECT_THROW(store.save(s), file_error);
  EXPECT_EQ(read_text(path("victim")), "precious");
}

// The files baton opens in place (the checkpoint lock, a node's log):
// O_NOFOLLOW, and only a regular file with no other hard link; a FIFO is
// refused without waiting for a reader.
TEST_F(atomic_file, open_for_writing_opens_only_a_plain_file_of_its_own) {
  std::string why;
  int fd = open_for_writing(path("lock"), O_RDWR | O_CREAT, 0644, why);
  ASSERT_GE(fd, 0) << why;
  ::close(fd);
  ASSERT_EQ(try_replace_file(path("victim"), "precious"), "");
  fs::create_symlink(path("victim"), path("link"));
  EXPECT_LT(open_for_writing(path("link"), O_RDWR | O_CREAT | O_TRUNC, 0644, why), 0);
  EXPECT_TRUE(baton::testing::contains(why, "cannot write '" + path("link") +
                                              "': it is a symbolic link"))
    << why;
  fs::create_symlink(path("nowhere"), path("dangling"));
  EXPECT_LT(open_for_writing(path("dangling"), O_WRONLY | O_CREAT, 0644, why), 0);
  EXPECT_FALSE(fs::exists(path("nowhere")));
  fs::create_hard_link(path("victim"), path("hard"));
  EXPECT_LT(open_for_writing(path("hard"), O_RDWR | O_CREAT | O_TRUNC, 0644, why), 0);
  EXPECT_TRUE(baton::testing::contains(why, "other hard links")) << why;
  EXPECT_EQ(read_text(path("victim")), "precious");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  EXPECT_LT(open_for_writing(path("fifo"), O_RDWR | O_CREAT, 0644, why), 0);
  EXPECT_TRUE(baton::testing::contains(why, "not a regular file")) << why;
}

// A device, a FIFO or a directory in the file's place is refused, not
// replaced: rename(2) over /dev/full made it a regular file (the outputs of
// `baton profile --out`, `plan --out`, `predict --json`, `report --out`, a
// node's --port-file and a pretraining's checkpoint, run as root), which
// every other process then wrote into.
TEST_F(atomic_file, a_device_a_fifo_or_a_directory_in_the_files_place_is_refused) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  fs::create_directory(path("dir"));
  const std::vector<std::pair<std::string, std::string>> refused{
    {"fifo", "it is not a regular file"}, {"dir", "it is a directory"}};
  for (const auto& [name, kind] : refused)
    for (const auto& why : {try_replace_file(path(name), "new"), try_check_writable(path(name))})
      EXPECT_TRUE(baton::testing::contains(why, "cannot write '" + path(name) + "': " + kind))
        << why;
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_TRUE(fs::is_directory(path("dir")));
  // A character device (/dev/null is one on every Linux), checked without
  // writing near it: the refusal comes before any temporary file is made.
  if (fs::is_character_file("/dev/null"))
    EXPECT_TRUE(baton::testing::contains(try_check_writable("/dev/null"), "not a regular file"));
  EXPECT_THROW(save_checkpoint(layered_model{}, path("fifo")), file_error);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
}
