#pragma once

// A single-host Slurm cluster for a test, from Debian's packages (munge,
// slurm-wlm): munged, slurmctld and slurmd on 127.0.0.1, with their key,
// socket, config, state and logs in the test's scratch directory and their
// ports chosen by the OS, stopped when the test ends (passed or not).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/commands.hpp"

namespace baton::testing {

/// `count` distinct TCP ports that no socket uses now, on every address,
/// below the range the OS hands out for bind(0) where there is room (so
/// that no other process is given one before the caller binds it), each
/// checked free by binding it; free again when this returns; empty when
/// fewer were found.
std::vector<uint16_t> free_tcp_ports(size_t count);

/// Why a Slurm cluster cannot run here: not root (slurmd starts every task
/// as its user, which only root may do) or one of Slurm's or munge's programs
/// missing (with the command that installs them); "" when it can.
std::string slurm_unavailable();

/// munged, slurmctld and slurmd started in the constructor as children of the
/// test, in the foreground (a test that dies takes them along: SIGTERM on its
/// death), from a slurm.conf in `dir` that names one node, `localhost` at
/// 127.0.0.1, with `cpus` CPUs whatever the machine has, and one partition,
/// `debug`. The destructor cancels the cluster's jobs and stops the daemons;
/// a guard process kills whatever of the cluster is left, also when the test
/// dies without running it.
class slurm_cluster {
public:
  /// Starts the daemons with their files under `dir` (an existing, empty
  /// directory the test owns) and waits, for up to `limit`, until `sinfo`
  /// shows the node idle. up() says whether that happened; failure() why
  /// not, with the daemons' logs. Throws only what a failed fork throws.
  explicit slurm_cluster(std::string dir, int cpus = 8,
                         std::chrono::seconds limit = std::chrono::seconds(60));
  /// Cancels every job of the cluster and stops slurmd, slurmctld and munged
  /// (SIGTERM, SIGKILL after 15 s).
  ~slurm_cluster();
  slurm_cluster(const slurm_cluster&) = delete;
  slurm_cluster& operator=(const slurm_cluster&) = delete;

  /// Whether the node is up and idle: srun and sbatch can run jobs.
  bool up() const { return failure_.empty(); }
  /// Why the cluster did not come up, with the tails of the daemons' logs;
  /// "" when it did.
  const std::string& failure() const { return failure_; }
  /// The absolute path of its slurm.conf.
  const std::string& config() const { return config_; }

  /// `command` run by /bin/sh in the cluster's directory with this cluster's
  /// SLURM_CONF and no other SLURM_* variable (a test started inside a Slurm
  /// job must not reach that job's cluster); stderr joins stdout. SIGTERM
  /// after `seconds` (srun then cancels its step), SIGKILL 10 s later.
  command_output run(const std::string& command, int seconds = 300) const;

  /// The last `lines` lines of every daemon's log files, headed by their
  /// names: what a failed test prints.
  std::string logs(int lines = 25) const;

private:
  /// A daemon run by this object.
  struct daemon {
    std::string name;
    pid_t pid = -1;
    std::vector<std::string> logs; ///< its own log file, then its stdout and stderr
  };

  /// Starts the daemons and waits for the node; "" or what went wrong.
  std::string start(int cpus, std::chrono::seconds limit);
  /// Starts `argv` as the daemon `name` (stdout and stderr in DIR/NAME.out),
  /// its own log file at `log`; "" or why it could not start.
  std::string spawn(const std::string& name, const std::vector<std::string>& argv,
                    const std::string& log);
  /// Polls `ready` every 200 ms until it holds, a daemon ended or `limit`
  /// passed; "" or what went wrong, naming `what` it waited for.
  template <class Ready>
  std::string await(const std::string& what, Ready ready, std::chrono::seconds limit);
  /// The name of a daemon that has ended (reaping it), or "".
  std::string ended_daemon();
  /// Starts the guard: a shell that waits for the end of a pipe only this
  /// process writes to, then SIGKILLs every process started with this
  /// cluster's SLURM_CONF (the daemons, slurmstepd, srun and the tasks).
  /// The pipe ends when stop() closes it or when the test dies, however it
  /// dies (a crash, ctest's SIGKILL at its timeout): slurmstepd and srun
  /// are no children of the test and would otherwise outlive it. "" or why
  /// it could not start.
  std::string start_guard();
  /// Ends the guard (it kills what is left) and reaps it.
  void stop_guard();
  /// Cancels the cluster's jobs and waits (bounded) until none is left.
  void cancel_jobs() const;
  /// Stops the daemons, the last started first.
  void stop();

  std::string dir_;
  std::string config_;
  std::string munge_socket_;
  std::vector<daemon> daemons_;
  pid_t guard_ = -1;     ///< the guard shell (start_guard)
  int guard_pipe_ = -1;  ///< the write end of its pipe; closing it ends the guard
  std::string failure_;
};

} // namespace baton::testing
