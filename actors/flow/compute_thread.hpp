#pragma once

// The thread of a compute actor: each runs detached, on its own thread with
// its own torch thread budget.

#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "messages/errc.hpp"

namespace baton::actors {
inline namespace flow {

/// Sets the torch intra-op thread budget of the calling thread, once per
/// thread (each detached actor owns its thread and its OpenMP team).
void use_thread_budget(int32_t threads);

/// `sys.spawn<caf::detached>(fun, xs...)` for the actor called `name`; a
/// thread that cannot be created (the process or its user is at its thread
/// limit) is an error value instead of an exception.
///
/// CAF 0.17 counts the actor as running and its thread as a detached thread
/// before it creates the thread, and uncounts neither when that fails:
/// ~actor_system then waited for them forever (a run that could not start a
/// head hung). Both counts are given back; the actor that never ran stays
/// allocated (its private thread object holds a reference to it).
template <class F, class... Ts>
caf::expected<caf::actor> spawn_detached(caf::actor_system& sys, const std::string& name, F fun,
                                         Ts&&... xs) {
  try {
    return sys.spawn<caf::detached>(fun, std::forward<Ts>(xs)...);
  } catch (const std::system_error& e) {
    sys.registry().dec_running();
    sys.dec_detached_threads();
    return make_error(errc::actor_failed,
                      name + ": cannot start its thread (" + e.what() +
                        "): the process is at its thread limit (see ulimit -u); run fewer "
                        "actors on this node");
  }
}

} // namespace flow
} // namespace baton::actors
