#pragma once

#include <chrono>
#include <cstdint>

#include <caf/actor_system_config.hpp>

#include "actors/net/tls.hpp"

namespace baton::actors {
inline namespace net {

/// The most CAF scheduler threads a process may ask for (runtime.scheduler_threads,
/// node.yaml's scheduler_threads, `baton node --scheduler-threads`): they only
/// route messages, and CAF aborts when it cannot create one.
inline constexpr int32_t max_scheduler_threads = 64;

/// The most compute (torch) threads one actor may ask for
/// (runtime.compute_threads, or a strategy's own budget): four times a
/// 64-core host. Every actor's threads are created when it starts, so a typo
/// such as 100000 must be an error, not thousands of threads.
inline constexpr int32_t max_compute_threads = 256;

/// Settings every baton process applies to its actor system.
struct system_settings {
  int32_t scheduler_threads = 2; ///< CAF threads: they only route messages
  /// Heartbeats must be on at *every* node, or a hung peer is never detected
  /// (and a one-sided timeout declares healthy idle peers dead).
  std::chrono::milliseconds heartbeat_interval{200};
  /// CAF closes a connection whose peer sent nothing (not even a heartbeat)
  /// for this long; 0: never. A closed connection is final (its proxies
  /// die), so this is only a backstop: the coordinator judges its nodes
  /// itself (runtime/node_watch.hpp) and its process and its local nodes use
  /// 0 (runtime/jobs.cpp). A `baton node`'s default (node.yaml
  /// connection_timeout_ms) is 5 minutes, so that a node does not drop a
  /// coordinator or a peer that is only stopped (Ctrl-Z, a straggler).
  std::chrono::milliseconds connection_timeout{300000};
  /// Every process of the jobs runs on this host: large tensors go through
  /// /dev/shm instead of the sockets (messages::use_shared_memory). A node:
  /// node.yaml `shared_memory`, `--shared-memory`; `baton run --local-nodes`
  /// without `--link`: runtime.shared_memory (default true) for its nodes
  /// and itself, never for emulated hosts.
  bool shared_memory = false;
  /// Mutual TLS (caf_openssl) when enabled; check it with check_tls_files()
  /// first: CAF aborts the process on a certificate it cannot load.
  tls_settings tls;
};

/// Registers baton's message types, loads the middleman, sets scheduler
/// threads, heartbeats and automatic node-to-node connections on `cfg`; with
/// TLS also loads caf::openssl::manager with the certificate, key and CA.
void configure(caf::actor_system_config& cfg, const system_settings& s);

} // namespace net
} // namespace baton::actors
