#pragma once

// Runs the real `baton` binary from tests and reads what it wrote.

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace baton::testing {

struct command_output {
  int exit_code = -1;
  std::string text; ///< stdout and stderr together
};

inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

/// Runs the shell command `cmd` and waits for it (output captured).
inline command_output run_shell(const std::string& cmd) {
  command_output out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr)
    return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    out.text.append(buf, n);
  int status = ::pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

/// `baton ARGS...` as a shell command line (stdin closed, stderr to stdout).
inline std::string baton_command(const std::vector<std::string>& args) {
  std::string cmd = quote(BATON_BINARY);
  for (const auto& a : args)
    cmd += " " + quote(a);
  return cmd + " 2>&1 </dev/null";
}

/// Runs `baton ARGS...` and waits for it (stdin closed, output captured).
inline command_output run_baton(const std::vector<std::string>& args) {
  return run_shell(baton_command(args));
}

/// Same, for input that once made baton read or allocate without end: it is
/// killed after `seconds` (exit code 137) and fails an allocation beyond
/// `megabytes` of address space, so that a regression fails the test instead
/// of the machine.
inline command_output run_baton_bounded(const std::vector<std::string>& args, int seconds = 60,
                                        int megabytes = 3072) {
  return run_shell("ulimit -v " + std::to_string(megabytes * 1024) + "; timeout -s KILL " +
                   std::to_string(seconds) + " " + baton_command(args));
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in{path};
  return nlohmann::json::parse(in, nullptr, false);
}

/// A fresh directory for one test's files.
inline std::string temp_dir(const std::string& name) {
  std::string pattern = "/tmp/baton-test-" + name + "-XXXXXX";
  return ::mkdtemp(pattern.data());
}

inline std::string source_path(const std::string& relative) {
  return std::string{BATON_SOURCE_DIR} + "/" + relative;
}

} // namespace baton::testing
