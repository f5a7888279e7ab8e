#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace baton::actors {
inline namespace runtime {

/// A child process that is always stopped: the destructor sends SIGTERM,
/// waits a grace period, then SIGKILLs. The child also gets SIGTERM if this
/// process dies first (PR_SET_PDEATHSIG).
class child_process {
public:
  /// Starts `argv` (argv[0] is the executable path) with stdout and stderr
  /// appended to `log_path`.
  static caf::expected<child_process> start(const std::vector<std::string>& argv,
                                            const std::string& log_path);

  child_process() = default;
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  /// True while the child has not exited (reaps it when it has).
  bool running();
  /// Waits for the child to exit; returns its exit code (128+signal if killed).
  int wait();
  /// SIGTERM, wait up to `grace`, then SIGKILL; returns the exit code.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds{3000});

  /// The last `lines` lines of the child's log, for error messages.
  std::string log_tail(size_t lines = 20) const;

private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool exited_ = false;
  std::string log_path_;
};

/// Absolute path of the running executable (/proc/self/exe).
std::string self_executable();

/// Makes a terminal stop (SIGTSTP: Ctrl-Z) stop the running children with
/// this process, and a continue (SIGCONT: `fg`, `bg`) continue them. Each
/// child has its own process group (so that a Ctrl-C reaches the parent
/// only, which stops them in order): the terminal's SIGTSTP would stop the
/// parent alone, and its local nodes would go on training meanwhile. Call
/// once, early in main.
void stop_children_with_this_process();

} // namespace runtime
} // namespace baton::actors
