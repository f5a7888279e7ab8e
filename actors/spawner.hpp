#pragma once

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "messages/types.hpp"

namespace baton::actors {

/// The actor types a node may start. A spawn_request naming anything else
/// is refused with errc::unknown_actor_type.
const std::vector<std::string>& registered_roles();

/// Parses `req.spec` for `req.role` and starts the actor on this process.
caf::expected<caf::actor> spawn_role(caf::actor_system& sys, const std::string& node,
                                     const messages::spawn_request& req);

/// This process's resources and usage (peak RSS, CPU time, cores, memory).
messages::node_report current_node_report(const std::string& node);

/// Spawns the spawner of node `node`: answers spawn_request with the new
/// actor and (get_atom, node_atom) with a node_report. It is detached because
/// spawning loads datasets and checkpoints. Every actor it starts is linked to
/// it: killing the spawner (node shutdown) kills them too.
caf::actor spawn_spawner(caf::actor_system& sys, const std::string& node);

} // namespace baton::actors
