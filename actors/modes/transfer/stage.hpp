#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

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

/// Refuses (errc::bad_file) a stage whose settings read a file outside the
/// node's roots: its backbone checkpoint and TorchScript file against `checkpoint_dir`.
caf::error check_paths(const stage_spec& spec, const path_roots& roots);

/// The `stage` role of a node's role table: parses the settings, checks
/// their files (check_paths) and spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_stage_role(caf::actor_system& sys, const spawn_args& args);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
