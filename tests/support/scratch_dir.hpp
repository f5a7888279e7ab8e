#pragma once

// A directory for one test's files, made fresh and removed unless the test
// failed; $TMPDIR pointed elsewhere for the processes a test starts.

#include <string>

namespace baton::testing {

/// A fresh directory $TMPDIR/baton-test-NAME-XXXXXX (/tmp when TMPDIR is
/// unset), owned by this object. The destructor removes it when the current
/// test passed (the current test suite, for a directory a SetUpTestSuite
/// made; the whole program, outside any suite); when it failed, it keeps it
/// and prints its path on stderr, so that its files can be read.
class scratch_dir {
public:
  /// Makes the directory; throws std::runtime_error naming the path and the
  /// reason when it cannot (GoogleTest reports that as the test's failure).
  explicit scratch_dir(const std::string& name);
  /// Removes the directory, or keeps it after a failure (see the class).
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  /// The directory's absolute path, without a trailing slash.
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/// Sets $TMPDIR to `dir` for the processes started while it lives (where
/// baton makes its temporary checkpoint and log directories), and restores
/// the old value (or unsets it) when it goes.
class scoped_tmpdir {
public:
  explicit scoped_tmpdir(const std::string& dir);
  ~scoped_tmpdir();
  scoped_tmpdir(const scoped_tmpdir&) = delete;
  scoped_tmpdir& operator=(const scoped_tmpdir&) = delete;

private:
  bool was_set_ = false;
  std::string old_;
};

} // namespace baton::testing
