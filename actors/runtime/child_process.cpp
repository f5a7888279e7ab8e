#include "actors/runtime/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

// The children that run, for the SIGTSTP handler, which may only read
// lock-free atomics: a slot holds a child's process id, 0 when free.
constexpr size_t max_tracked_children = 256;
std::atomic<pid_t> running_children[max_tracked_children];

void track(pid_t pid) {
  for (auto& slot : running_children) {
    pid_t free = 0;
    if (slot.compare_exchange_strong(free, pid))
      return;
  }
  // More children than slots: the rest are not stopped on Ctrl-Z.
}

void untrack(pid_t pid) {
  for (auto& slot : running_children) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0))
      return;
  }
}

/// Sends `sig` to every running child's process group (to the child itself
/// while it has not made its group yet). Async-signal-safe.
void signal_children(int sig) {
  for (auto& slot : running_children)
    if (pid_t pid = slot.load(); pid > 0 && ::kill(-pid, sig) != 0)
      ::kill(pid, sig);
}

/// SIGTSTP: stops the children, then this process (the default action,
/// raised again with the handler off); runs on when continued, and
/// continues the children.
void on_terminal_stop(int) {
  int saved = errno;
  signal_children(SIGSTOP);
  ::signal(SIGTSTP, SIG_DFL);
  sigset_t tstp;
  ::sigemptyset(&tstp);
  ::sigaddset(&tstp, SIGTSTP);
  ::sigprocmask(SIG_UNBLOCK, &tstp, nullptr); // blocked while its handler runs
  ::raise(SIGTSTP);                           // stopped here until SIGCONT
  ::signal(SIGTSTP, on_terminal_stop);
  signal_children(SIGCONT);
  errno = saved;
}

/// In a child between fork and exec (async-signal-safe): every signal this
/// process handles back to its default, as execv would leave it; ignored
/// ones stay ignored. Otherwise a stop signal in between (the parent
/// stopping a child it has just started) ran the parent's handler in the
/// copy, which printed the parent's "second signal" message.
void reset_handled_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_DFL ||
        old.sa_handler == SIG_IGN)
      continue;
    struct sigaction fresh {};
    fresh.sa_handler = SIG_DFL;
    ::sigaction(sig, &fresh, nullptr);
  }
}

int exit_code(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

} // namespace

caf::expected<child_process> child_process::start(const std::vector<std::string>& argv,
                                                  const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string why;
  int log = model::open_for_writing(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644, why);
  if (log < 0)
    return make_error(errc::bad_file, "log file: " + why);
  auto parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return make_error(errc::actor_failed, std::string{"fork failed: "} + std::strerror(errno));
  }
  if (pid == 0) {
    // Own process group: a Ctrl-C on the terminal reaches the parent only,
    // which then stops its children in order.
    reset_handled_signals();
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1); // the parent died before prctl took effect
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  track(pid);
  child_process child;
  child.pid_ = pid;
  child.log_path_ = log_path;
  return child;
}

child_process::child_process(child_process&& other) noexcept
  : pid_(other.pid_), status_(other.status_), exited_(other.exited_),
    log_path_(std::move(other.log_path_)) {
  other.pid_ = -1;
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    stop();
    pid_ = other.pid_;
    status_ = other.status_;
    exited_ = other.exited_;
    log_path_ = std::move(other.log_path_);
    other.pid_ = -1;
  }
  return *this;
}

child_process::~child_process() {
  stop();
}

bool child_process::running() {
  if (pid_ < 0 || exited_)
    return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
    exited_ = true;
    untrack(pid_);
  }
  return !exited_;
}

int child_process::wait() {
  if (pid_ < 0)
    return -1;
  while (!exited_) {
    if (::waitpid(pid_, &status_, 0) == pid_) {
      exited_ = true;
      untrack(pid_);
    } else if (errno != EINTR)
      return -1;
  }
  return exit_code(status_);
}

int child_process::stop(std::chrono::milliseconds grace) {
  if (pid_ < 0)
    return -1;
  if (running()) {
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running())
      ::kill(pid_, SIGKILL);
  }
  return wait();
}

std::string child_process::log_tail(size_t lines) const {
  std::ifstream in{log_path_};
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > lines)
      tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail)
    out += "  | " + l + "\n";
  return out;
}

void stop_children_with_this_process() {
  ::signal(SIGTSTP, on_terminal_stop);
}

std::string self_executable() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "baton";
  return std::string(buf, static_cast<size_t>(n));
}

} // namespace runtime
} // namespace baton::actors
