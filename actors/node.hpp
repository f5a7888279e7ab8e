#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/system.hpp"

namespace baton::actors {

/// What `baton node` runs with (node.yaml or flags).
struct node_settings {
  std::string name = "node";
  std::string host = "127.0.0.1"; ///< address to listen on
  uint16_t port = 0;              ///< 0: chosen by the OS
  std::string port_file;          ///< if set, the chosen port is written here
  system_settings system;
};

/// Reads a node.yaml: keys name, host, port, scheduler_threads, heartbeat_ms,
/// connection_timeout_ms. Errors name the file, the line and what was expected.
caf::expected<node_settings> load_node_settings(const std::string& path);

/// Runs a node until `stop` becomes true: starts an actor system, publishes
/// the spawner on host:port, prints "baton node NAME listening on HOST:PORT"
/// and writes the port file. Returns the process exit code.
int run_node(const node_settings& settings, const std::atomic<bool>& stop);

} // namespace baton::actors
