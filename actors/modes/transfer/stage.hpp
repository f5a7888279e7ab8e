#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"

namespace baton::actors {

/// Builds the backbone slice [begin, end), loads its weights from the
/// checkpoint (errors are returned, nothing is spawned) and spawns a detached
/// frozen stage named `name`.
///
/// A stage keeps its inputs in arrival order. It forwards a microbatch when
/// every output window has a credit; it returns the upstream credit when it
/// takes the microbatch up (so the next transfer overlaps this compute).
/// Controls are forwarded in order, without credits.
caf::expected<caf::actor> spawn_stage(caf::actor_system& sys, const std::string& name,
                                      const std::string& node, const stage_spec& spec);

} // namespace baton::actors
