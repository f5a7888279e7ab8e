#pragma once

// Plain-TCP BASP connections whose frames are checked before CAF reads them.
//
// CAF 0.17 allocates whatever payload length a BASP header announces (see
// frame_guard.hpp). caf_openssl shows where a transport plugs in: a second
// middleman actor, sharing the middleman's BASP broker, whose doormen and
// scribes read through their own policy. Baton's reads through a
// frame_guard, so that a header announcing more than the limit fails the
// read: CAF then closes the connection with nothing allocated, and the
// refusal is logged with the peer's address. A header whose payload does
// not fit in the process's frame budget (frame_guard.hpp) is held back from
// CAF, and its connection is not read, until other frames have arrived.
//
//   publish_framed / remote_actor_framed        (instead of sys.middleman())
//        |  publish / connect requests
//   framed middleman actor  --  doorman / scribe: stream_impl<framed policy>
//        |  doormen and scribes handed over             |  read_some
//   the middleman's BASP broker (shared)           frame_guard.feed()
//
// CAF's automatic node-to-node connections are off (net/system.cpp), so
// BASP opens no port of its own: nodes connect to each other's published,
// guarded ports (job_nodes::connect_peers). With TLS, baton keeps
// caf_openssl, whose handshake refuses strangers before BASP reads anything.

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

namespace baton::actors {
inline namespace net {

/// Starts the guarded transport of `sys` once (later calls do nothing).
/// Call right after the actor system starts, before it listens or connects.
void install_framed_transport(caf::actor_system& sys);

/// Publishes `whom` on host:port (0: chosen by the OS) through the guarded
/// transport; returns the port. Installs the transport if needed.
caf::expected<uint16_t> publish_framed(caf::actor_system& sys, const caf::actor& whom,
                                       uint16_t port, const std::string& host);

/// Connects to the (dynamically typed) actor published at host:port through
/// the guarded transport. Errors are CAF's (sec::cannot_connect_to_node,
/// disconnect_during_handshake, no_actor_published_at_port, ...).
caf::expected<caf::actor> remote_actor_framed(caf::actor_system& sys, const std::string& host,
                                              uint16_t port);

} // namespace net
} // namespace baton::actors
