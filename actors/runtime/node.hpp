#pragma once

#include <atomic>
#include <vector>

#include "actors/roles/role_type.hpp"
#include "actors/runtime/node_settings.hpp"

namespace baton::actors {
inline namespace runtime {

/// Runs a node until `stop` becomes true: checks its TLS files and path roots
/// (exit code 2 on an error, before any actor system starts), starts an
/// actor system, publishes the spawner on host:port (with TLS only through
/// caf_openssl), prints "baton node NAME listening on HOST:PORT" (plus
/// " with TLS") and writes the port file; spawns the roles of `roles` only.
/// Returns the process exit code.
int run_node(const node_settings& settings, const std::atomic<bool>& stop,
             const std::vector<role_type>& roles);

} // namespace runtime
} // namespace baton::actors
