#pragma once

// A suite whose input files one Python script (with torch) writes once: the
// TorchScript models and data the suites that load PyTorch's own files share.

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/python_torch.hpp"
#include "tests/support/scratch_dir.hpp"

namespace baton::testing {

/// The fixture of a suite `Suite` that declares `scratch_name` (its scratch
/// directory's name) and `script` (Python, run once with that directory as
/// its argument, before the first test). Every test skips without
/// python3-torch and fails when the script did.
template <class Suite>
class python_files : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (python_with_torch().empty())
      return;
    dir_ = std::make_unique<scratch_dir>(Suite::scratch_name);
    const auto run = run_python(dir_->path(), "make_files.py", Suite::script, {dir_->path()});
    if (run.exit_code != 0)
      failure_ = "make_files.py failed (exit " + std::to_string(run.exit_code) + "): " + run.text;
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (python_with_torch().empty())
      GTEST_SKIP() << no_python_torch;
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  /// The file `name` in the suite's directory.
  static std::string path(const std::string& name) { return dir_->path() + "/" + name; }

  static inline std::unique_ptr<scratch_dir> dir_;
  static inline std::string failure_;
};

} // namespace baton::testing
