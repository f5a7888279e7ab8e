#pragma once

#include <chrono>
#include <cstdint>

#include <caf/actor_system_config.hpp>

#include "actors/tls.hpp"

namespace baton::actors {

/// Settings every baton process applies to its actor system.
struct system_settings {
  int32_t scheduler_threads = 2; ///< CAF threads: they only route messages
  /// Heartbeats must be on at *every* node, or a hung peer is never detected
  /// (and a one-sided timeout declares healthy idle peers dead).
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds connection_timeout{2000};
  /// Mutual TLS (caf_openssl) when enabled; check it with check_tls_files()
  /// first: CAF aborts the process on a certificate it cannot load.
  tls_settings tls;
};

/// Registers baton's message types, loads the middleman, sets scheduler
/// threads, heartbeats and automatic node-to-node connections on `cfg`; with
/// TLS also loads caf::openssl::manager with the certificate, key and CA.
void configure(caf::actor_system_config& cfg, const system_settings& s);

} // namespace baton::actors
