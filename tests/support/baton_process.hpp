#pragma once

// A `baton` command in the background, for tests that act on it while it
// runs (a signal, SIGSTOP, its log so far) and that must not leave it
// running when they fail.

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace baton::testing {

/// What the child sets up before it runs baton.
struct process_limits {
  /// Root drops to uid and gid 65534 first (a limit on threads does not
  /// bind root); other users run as themselves.
  bool as_nobody = false;
  /// RLIMIT_NPROC, the threads the user may have in all; 0 leaves it alone.
  rlim_t user_threads = 0;
  /// Standard output into this descriptor (a pipe's writing end the test
  /// reads) instead of the log; -1 keeps it in the log.
  int stdout_fd = -1;
};

/// `baton ARGS...` started in the constructor, in a process group of its
/// own (a signal to it reaches no other process), with stdout and stderr in
/// a log file. The destructor kills it with its group (SIGKILL) while it
/// still runs, even when the test failed; it gets SIGTERM if the test
/// process dies first.
class baton_process {
public:
  /// Starts `baton ARGS...` with its output in `log_path` (made anew);
  /// throws std::runtime_error when the log cannot be made or fork fails
  /// (GoogleTest reports that as the test's failure).
  baton_process(const std::vector<std::string>& args, std::string log_path,
                const process_limits& limits = {});
  ~baton_process();
  baton_process(const baton_process&) = delete;
  baton_process& operator=(const baton_process&) = delete;

  /// Its process id.
  pid_t pid() const { return pid_; }
  /// True while it has not exited (reaps it when it has).
  bool running();
  /// Waits for its end; its exit code (128 + signal when a signal ended it).
  int wait();
  /// The same, waiting at most `limit`; -1 when it still runs then.
  int wait_for(std::chrono::milliseconds limit);
  /// Sends `sig` to baton only, not to the processes it started.
  void signal(int sig) const;
  /// Its peak resident set in KiB (ru_maxrss) once it ended; -1 before.
  int64_t peak_kb() const { return peak_kb_; }

  /// Everything it printed so far.
  std::string output() const;
  /// Waits until its output contains `text`; false when it ended or `limit`
  /// passed first without it.
  bool await_output(const std::string& text, std::chrono::milliseconds limit);
  /// Waits until the file `path` exists; false when it ended or `limit`
  /// passed first without it.
  bool await_file(const std::string& path, std::chrono::milliseconds limit);

private:
  /// Reaps it if it ended, waiting for that when `block`: its exit code and
  /// peak memory are known from then on. False when it still runs or wait4
  /// failed (errno says why).
  bool reap(bool block);
  /// Polls `ready` every 20 ms while baton runs, for up to `limit`; its last
  /// answer.
  template <class Ready>
  bool await(Ready ready, std::chrono::milliseconds limit);

  pid_t pid_ = -1;
  int exit_code_ = -1;
  int64_t peak_kb_ = -1;
  std::string log_path_;
};

} // namespace baton::testing
