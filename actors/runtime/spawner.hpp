#pragma once

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/tls.hpp"
#include "actors/roles/role_type.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace runtime {

/// Starts the actor `req` asks for on this process, with the factory of its
/// role in `roles` (which parses the settings and checks the files they name
/// against `roots`). A role outside `roles` is refused with
/// errc::unknown_actor_type, naming the roles there are. Nothing is started
/// on any error.
caf::expected<caf::actor> spawn_role(caf::actor_system& sys, const std::string& node,
                                     const messages::spawn_request& req,
                                     const std::vector<role_type>& roles,
                                     const path_roots& roots = {});

/// This process's resources and usage (peak RSS, CPU time, cores, memory).
messages::node_report current_node_report(const std::string& node);

/// What a node's spawner enforces.
struct spawner_policy {
  std::vector<role_type> roles; ///< what it may spawn
  path_roots roots;
  /// The node's TLS identity. When enabled, the spawner answers the identity
  /// proof of actors/net/tls.hpp (auth_atom) and serves spawn requests and node
  /// reports only to peer processes that completed it (and to this process).
  tls_settings tls;
  /// Names (subjectAltName DNS, or the CN without one) a peer's certificate must carry, one
  /// of them (node.yaml `tls.allow`); empty: any certificate of the CA.
  std::vector<std::string> allow;
};

/// A node's liveness probe: (get_atom, pulse_atom) to a spawner answers its
/// pulse actor; (pulse_atom) to the pulse actor is answered at once with
/// (pulse_atom), and so is (pulse_atom, tensor_set) once decoded (the
/// runtime calibration's sized message). The coordinator's watch
/// (job_nodes) pings it: the spawner itself blocks while it spawns (loading
/// data), so it cannot be the probe.
using pulse_atom = caf::atom_constant<caf::atom("pulse")>;

/// The pulse actor's behaviour: an event-based actor on the node's
/// scheduler, free while the detached spawner loads data; it answers a
/// (pulse_atom) and a (pulse_atom, tensor_set) with (pulse_atom) to the
/// sender (the latter once decoded: apps/predict/runtime_calibration.hpp).
caf::behavior pulse_behavior(caf::event_based_actor* self);

/// Spawns the spawner of node `node`: answers spawn_request with the new
/// actor, (get_atom, node_atom) with a node_report and (get_atom, pulse_atom)
/// with its pulse actor (which it is linked to); with TLS also the
/// identity proof ((auth_atom, nonce) and (auth_atom, certificate, signature)).
/// It is detached because spawning loads datasets and checkpoints. Every
/// actor it starts is linked to it: killing the spawner (node shutdown) kills
/// them too.
caf::actor spawn_spawner(caf::actor_system& sys, const std::string& node,
                         spawner_policy policy = {});

} // namespace runtime
} // namespace baton::actors
