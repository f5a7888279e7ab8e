// Every test program's $TMPDIR: a directory of its own, removed when the
// program passes.
//
// A baton run that fails keeps its temporary directories for the user to
// read (the nodes' logs of `--local-nodes`, the checkpoints it may resume
// from: docs/faults-and-recovery.md). The suites fail runs on purpose (faults,
// corrupt files, lost nodes), and each such run left a baton-nodes-* or
// baton-checkpoints-* directory in /tmp: four a CI run. Linked into every
// test executable (an object library, so that its registration is not
// dropped by the linker), this environment points $TMPDIR at
// $TMPDIR/baton-test-PROGRAM-XXXXXX for the program and the processes it
// starts, and removes it at the end unless a test failed, when it keeps it
// and prints its path, as scratch_dir does for a test's own files.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace {

class tmpdir_environment : public ::testing::Environment {
public:
  void SetUp() override {
    const char* parent = std::getenv("TMPDIR");
    std::string pattern = (parent != nullptr && *parent != '\0' ? parent : "/tmp");
    pattern += std::string{"/baton-test-"} + program_invocation_short_name + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      // The tests still run, in the $TMPDIR they were given.
      std::fprintf(stderr, "cannot make a temporary directory '%s' for this program: %s\n",
                   pattern.c_str(), std::strerror(errno));
      return;
    }
    path_ = pattern;
    ::setenv("TMPDIR", path_.c_str(), 1);
  }

  void TearDown() override {
    if (path_.empty())
      return;
    if (::testing::UnitTest::GetInstance()->Failed()) {
      std::fprintf(stderr, "kept the temporary files of this failed program's runs: %s\n",
                   path_.c_str());
      return;
    }
    std::error_code ec; // a leftover is only reported
    std::filesystem::remove_all(path_, ec);
    if (ec)
      std::fprintf(stderr, "cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
  }

private:
  std::string path_;
};

// GoogleTest owns and deletes the environment.
[[maybe_unused]] auto* const registered =
  ::testing::AddGlobalTestEnvironment(new tmpdir_environment);

} // namespace
