#include "tests/support/scratch_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <gtest/gtest.h>

namespace baton::testing {

namespace {

/// Whether what a directory made now belongs to has failed so far: the
/// running test, else the running suite (SetUpTestSuite/TearDownTestSuite),
/// else the whole program.
bool owner_failed() {
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (const auto* test = unit->current_test_info())
    return test->result()->Failed();
  if (const auto* suite = unit->current_test_suite())
    return suite->Failed();
  return unit->Failed();
}

} // namespace

scratch_dir::scratch_dir(const std::string& name) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string parent = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  const std::string wanted = parent + "/baton-test-" + name + "-XXXXXX";
  std::string pattern = wanted; // mkdtemp fills in the Xs
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot make the scratch directory '" + wanted +
                             "': " + std::strerror(errno));
  path_ = std::filesystem::absolute(pattern).string();
}

scratch_dir::~scratch_dir() {
  if (owner_failed()) {
    std::fprintf(stderr, "kept the scratch directory of a failed test: %s\n", path_.c_str());
    return;
  }
  std::error_code ec; // a destructor does not throw; a leftover is only reported
  std::filesystem::remove_all(path_, ec);
  if (ec)
    std::fprintf(stderr, "cannot remove the scratch directory %s: %s\n", path_.c_str(),
                 ec.message().c_str());
}

scoped_tmpdir::scoped_tmpdir(const std::string& dir) {
  if (const char* old = std::getenv("TMPDIR")) {
    was_set_ = true;
    old_ = old;
  }
  ::setenv("TMPDIR", dir.c_str(), 1);
}

scoped_tmpdir::~scoped_tmpdir() {
  if (was_set_)
    ::setenv("TMPDIR", old_.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

} // namespace baton::testing
