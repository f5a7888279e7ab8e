#include "tests/support/commands.hpp"

#include <sys/wait.h>

#include <cstdio>

namespace baton::testing {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

std::string baton_command(const std::vector<std::string>& args) {
  std::string command = quote(BATON_BINARY);
  for (const auto& a : args)
    command += " " + quote(a);
  return command + " 2>&1 </dev/null";
}

command_output run_shell(const std::string& command) {
  command_output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    return out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    out.text.append(buffer, n);
  int status = ::pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

command_output run_baton(const std::vector<std::string>& args) {
  return run_shell(baton_command(args));
}

command_output run_baton_bounded(const std::vector<std::string>& args, int seconds,
                                 int megabytes) {
  std::string limit =
    megabytes > 0 ? "ulimit -v " + std::to_string(megabytes * 1024) + "; " : std::string{};
  return run_shell(limit + "timeout -s KILL " + std::to_string(seconds) + " " +
                   baton_command(args));
}

std::vector<std::string> with(std::vector<std::string> args,
                              std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

std::vector<std::string> with(std::vector<std::string> args,
                              const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string source_path(const std::string& relative) {
  return std::string{BATON_SOURCE_DIR} + "/" + relative;
}

} // namespace baton::testing
