#pragma once

// How a compute actor fails: the coordinator is told the actor, the code and
// why, and the actor quits; an exception inside a computation becomes such a
// failure (error_of).

#include <exception>
#include <string>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/local_actor.hpp>

#include "actors/flow/error_of.hpp"

namespace baton::actors {
inline namespace flow {

/// Tells the coordinator that `actor` failed and why, then quits `self`
/// (errc::actor_failed: the run fails with that code).
void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const std::string& what);

/// Same, for a failure whose cause is an error value (error_of): the
/// coordinator is told its code, with which the run fails (a LibTorch error
/// is compute_failed, a file bad_file), and its text, which names the code
/// unless it is actor_failed ("compute_failed: forward: ..."); `self` quits
/// with it.
void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const caf::error& cause);

/// Runs `f`; an exception fails the actor (its state has `coordinator`,
/// `name` and `work`) with error_of(exception, `what`): a LibTorch error is
/// compute_failed, a model file error bad_file. A heartbeat goes first, so
/// that the coordinator knows the step the failure came at (an error that
/// recurs at the same step after a restart is not retried). Whether `f`
/// succeeded.
template <class Self, class F>
bool guarded(Self* self, const std::string& what, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    self->state.work.heartbeat("nothing: it failed");
    fail(self, self->state.coordinator, self->state.name, error_of(e, what));
    return false;
  }
}

} // namespace flow
} // namespace baton::actors
