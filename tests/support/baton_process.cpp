#include "tests/support/baton_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "tests/support/text.hpp"

namespace baton::testing {

namespace {

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_baton(char* const* argv, int log, const process_limits& limits,
                             pid_t parent) {
  ::setpgid(0, 0);
  ::dup2(limits.stdout_fd >= 0 ? limits.stdout_fd : log, STDOUT_FILENO);
  ::dup2(log, STDERR_FILENO);
  if (limits.as_nobody && ::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
    ::_exit(126);
  if (limits.user_threads > 0) {
    rlimit limit{limits.user_threads, limits.user_threads};
    ::setrlimit(RLIMIT_NPROC, &limit);
  }
  // After setuid, which clears it.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent)
    ::_exit(1); // the test died before prctl took effect
  ::execv(BATON_BINARY, argv);
  ::_exit(127);
}

} // namespace

template <class Ready>
bool baton_process::await(Ready ready, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready() && running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return ready();
}

baton_process::baton_process(const std::vector<std::string>& args, std::string log_path,
                             const process_limits& limits)
  : log_path_(std::move(log_path)) {
  std::vector<std::string> all{BATON_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (log < 0)
    throw std::runtime_error("cannot make the log '" + log_path_ + "': " + std::strerror(errno));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0)
    exec_baton(argv.data(), log, limits, parent);
  ::close(log);
  if (pid_ < 0)
    throw std::runtime_error(std::string{"cannot fork for baton: "} + std::strerror(errno));
}

baton_process::~baton_process() {
  if (!running())
    return;
  if (::kill(-pid_, SIGKILL) != 0) // before the child made its group
    ::kill(pid_, SIGKILL);
  wait();
}

bool baton_process::running() {
  reap(false);
  return pid_ > 0 && exit_code_ < 0;
}

int baton_process::wait() {
  while (running())
    if (!reap(true) && errno != EINTR)
      return -1;
  return exit_code_;
}

bool baton_process::reap(bool block) {
  if (pid_ <= 0 || exit_code_ >= 0)
    return true;
  int status = 0;
  rusage usage{};
  if (::wait4(pid_, &status, block ? 0 : WNOHANG, &usage) != pid_)
    return false;
  exit_code_ = exit_code_of(status);
  peak_kb_ = usage.ru_maxrss;
  return true;
}

int baton_process::wait_for(std::chrono::milliseconds limit) {
  await([] { return false; }, limit);
  return running() ? -1 : exit_code_;
}

void baton_process::signal(int sig) const {
  ::kill(pid_, sig);
}

std::string baton_process::output() const {
  return read_text(log_path_);
}

bool baton_process::await_output(const std::string& text, std::chrono::milliseconds limit) {
  return await([&] { return contains(output(), text); }, limit);
}

bool baton_process::await_file(const std::string& path, std::chrono::milliseconds limit) {
  return await([&] { return std::filesystem::exists(path); }, limit);
}

} // namespace baton::testing
