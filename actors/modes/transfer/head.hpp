#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/transfer/head_settings.hpp"
#include "actors/roles/role_type.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// Builds the head model (initial weights from its seed) and spawns a
/// detached head actor named `name`.
///
/// A head returns a credit as soon as it takes a microbatch up, trains on its
/// task's labels (or counts correct predictions for eval microbatches), steps
/// after the last microbatch of each minibatch, reports every epoch on
/// control{epoch_end} and sends its final report on control{end_of_stream}.
caf::expected<caf::actor> spawn_head(caf::actor_system& sys, const std::string& name,
                                     const std::string& node, const head_settings& spec);

/// Refuses (errc::bad_file) a head whose settings read a file outside the
/// node's roots: its checkpoint directory and TorchScript file against `checkpoint_dir`.
caf::error check_paths(const head_settings& spec, const path_roots& roots);

/// The `head` role of a node's role table: parses the settings, checks
/// their files (check_paths) and spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_head_role(caf::actor_system& sys, const spawn_args& args);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
