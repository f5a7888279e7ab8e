#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/net/system.hpp"
#include "actors/runtime/spawner.hpp"

namespace baton::actors {
inline namespace runtime {

/// What `baton node` runs with (node.yaml or flags).
struct node_settings {
  std::string name = "node";
  std::string host = "127.0.0.1"; ///< address to listen on
  uint16_t port = 0;              ///< 0: chosen by the OS
  std::string port_file;          ///< if set, the chosen port is written here
  /// `--insecure`: listen without TLS on an address that is not loopback.
  /// Without it such a node refuses to start: a plain port lets anyone who
  /// reaches it spawn actors (docs/security.md).
  bool insecure = false;
  /// system.tls: `tls: {certificate, key, ca}`; system.shared_memory:
  /// `shared_memory` / `--shared-memory`
  system_settings system;
  /// `tls.allow`: names (subjectAltName DNS, or the CN without one) of the peer certificates
  /// it serves; empty: any certificate of its CA.
  std::vector<std::string> tls_allow;
  path_roots paths;               ///< `data_dirs`, `checkpoint_dir`; empty: unrestricted
  /// Called once with the port the node listens on, before it serves (`baton
  /// launch` tells rank 0 where its node is); not called when it cannot listen.
  std::function<void(uint16_t port)> listening;
};

/// Reads a node.yaml: keys name, host, port, scheduler_threads, heartbeat_ms,
/// connection_timeout_ms (when the node closes a silent connection: default
/// 5 minutes, see system_settings), tls {certificate, key, ca, allow},
/// data_dirs, checkpoint_dir, shared_memory. Relative paths are relative to the file's directory.
/// Errors name the file, the line and what was expected.
caf::expected<node_settings> load_node_settings(const std::string& path);

/// Same, from YAML text; `path` only names it in error messages.
caf::expected<node_settings> parse_node_settings(const std::string& yaml_text,
                                                 const std::string& path);

} // namespace runtime
} // namespace baton::actors
