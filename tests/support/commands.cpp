#include "tests/support/commands.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "tests/support/zygote.hpp"

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

namespace {

int shell_exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// `baton ARGS...` forked by the suite's zygote, its output read to the end
/// (as popen's); std::nullopt when there is no zygote.
std::optional<command_output> run_forked(const std::vector<std::string>& args) {
  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0)
    return std::nullopt;
  auto child = zygote_start(args, output[1]);
  ::close(output[1]);
  if (!child) {
    ::close(output[0]);
    return std::nullopt;
  }
  command_output out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(output[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    out.text.append(buffer, static_cast<size_t>(n));
  }
  ::close(output[0]);
  const int status = zygote_wait(*child).first;
  out.exit_code = status < 0 ? -1 : shell_exit_code(status);
  return out;
}

} // namespace

command_output run_shell(const std::string& command) {
  command_output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    return out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    out.text.append(buffer, n);
  out.exit_code = shell_exit_code(::pclose(pipe));
  return out;
}

command_output run_baton(const std::vector<std::string>& args) {
  if (auto forked = run_forked(args))
    return *forked;
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
