#pragma once

// A real `baton node` process for a test, always stopped when the test ends.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/runtime/child_process.hpp"

namespace baton::testing {

/// `baton node` with a port chosen by the OS: started and waited for in the
/// constructor, stopped in the destructor (SIGTERM, then SIGKILL; see
/// actors::child_process), even when the test fails.
class node_process {
public:
  /// Starts `LAUNCHER... baton node ARGS... --name NAME --port 0 --port-file
  /// F` with its output in DIR/NAME-K.log (K counts the nodes of the
  /// process, so names may repeat in one directory) and waits up to 30 s for
  /// the port in F. `args` come first so that a --config among them does
  /// not replace the name and port. `launcher` runs the node through
  /// another program, e.g. {"/bin/sh", "-c", "exec ip netns exec NS \"$@\"",
  /// "sh"}; its first element is a path (no PATH search).
  node_process(const std::string& dir, const std::string& name,
               const std::vector<std::string>& args = {},
               const std::vector<std::string>& launcher = {});

  /// The port it listens on; 0 when it never wrote one (log() says why).
  uint16_t port() const { return port_; }
  /// Its process id (the launcher's, which a launcher should exec away).
  pid_t pid() const { return child_.pid(); }
  /// True while the process has not exited.
  bool running() { return child_.running(); }
  /// Stops it now, as the destructor would; returns its exit code.
  int stop() { return child_.stop(); }
  /// The path of its log file (stdout and stderr).
  const std::string& log_path() const { return log_path_; }
  /// Everything it logged so far, after why it could not start, if it could not.
  std::string log() const;

private:
  actors::child_process child_;
  uint16_t port_ = 0;
  std::string log_path_;
  std::string start_error_;
};

} // namespace baton::testing
