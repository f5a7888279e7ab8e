#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/config/role_spec.hpp"

namespace baton::actors {

/// Builds the head model (initial weights from its seed) and spawns a
/// detached head actor named `name`.
///
/// A head returns a credit as soon as it takes a microbatch up, trains on its
/// task's labels (or counts correct predictions for eval microbatches), steps
/// after the last microbatch of each minibatch, reports every epoch on
/// control{epoch_end} and sends its final report on control{end_of_stream}.
caf::expected<caf::actor> spawn_head(caf::actor_system& sys, const std::string& name,
                                     const std::string& node, const head_role_spec& spec);

} // namespace baton::actors
