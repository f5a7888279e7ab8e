#pragma once

// Python's torch for the tests that need a real PyTorch on the other side:
// writing TorchScript models (torch.jit.script(...).save) that baton loads.

#include <string>
#include <vector>

#include "tests/support/commands.hpp"

namespace baton::testing {

/// A python3 that can import torch, or "" when none can: pyenv's python3,
/// first in $PATH, often cannot; Debian's python3-torch is /usr/bin/python3's.
/// Asked once per test program (importing torch takes seconds).
const std::string& python_with_torch();

/// What a test says when python_with_torch() is "".
inline constexpr const char* no_python_torch =
  "no python3 that can import torch (install python3-torch) to write the TorchScript models "
  "this test loads";

/// Writes `script` to `dir`/`name` and runs it with python_with_torch() and
/// `args` (stdin closed, stderr with stdout). Precondition: there is one.
command_output run_python(const std::string& dir, const std::string& name,
                          const std::string& script, const std::vector<std::string>& args);

} // namespace baton::testing
