#pragma once

// Runs the real `baton` binary (and shell commands) from tests and waits for
// it, with its output captured.

#include <initializer_list>
#include <string>
#include <vector>

namespace baton::testing {

/// How a command ended and what it printed.
struct command_output {
  int exit_code = -1; ///< 128 + signal when a signal ended it; -1 when it did not start
  std::string text;   ///< stdout and stderr together
};

/// `s` single-quoted for /bin/sh.
std::string quote(const std::string& s);

/// `baton ARGS...` as a shell command line (stdin closed, stderr to stdout),
/// for a test that runs it inside a script of its own.
std::string baton_command(const std::vector<std::string>& args);

/// Runs the shell command `command` and waits for it (stdout captured).
command_output run_shell(const std::string& command);

/// Runs `baton ARGS...` and waits for it (stdin closed, output captured).
command_output run_baton(const std::vector<std::string>& args);

/// Same, for input that once made baton read or allocate without end: it is
/// killed after `seconds` (exit code 137) and fails an allocation beyond
/// `megabytes` of address space (0: no limit), so that a regression fails
/// the test instead of the machine.
command_output run_baton_bounded(const std::vector<std::string>& args, int seconds = 60,
                                 int megabytes = 3072);

/// `args` followed by `more`: a job's arguments with a few added.
std::vector<std::string> with(std::vector<std::string> args,
                              std::initializer_list<std::string> more);
/// `args` followed by `more`.
std::vector<std::string> with(std::vector<std::string> args,
                              const std::vector<std::string>& more);

/// The absolute path of `relative` in the source tree ("configs/transfer.yaml").
std::string source_path(const std::string& relative);

} // namespace baton::testing
