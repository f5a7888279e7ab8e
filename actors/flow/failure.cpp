#include "actors/flow/failure.hpp"

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/flow/protocols.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace flow {

void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const std::string& what) {
  spdlog::error("{}: {}", actor, what);
  // Sent as `self`: the coordinator tells this actor from an earlier
  // incarnation of the same name (after a restart) by its address.
  if (coordinator)
    caf::send_as(caf::actor_cast<caf::actor>(self), coordinator, failure_atom::value, actor,
                 static_cast<uint8_t>(errc::actor_failed), what);
  if (auto* ev = dynamic_cast<caf::event_based_actor*>(self))
    ev->quit(make_error(errc::actor_failed, actor + ": " + what));
}

void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const caf::error& cause) {
  // The run fails with the cause's code (a baton error; anything else is
  // actor_failed), which the coordinator names: its text is the context
  // only. This actor's log line names a cause of another kind
  // (compute_failed, bad_file) itself.
  bool ours = cause.category() == error_category_atom;
  auto code = ours ? cause.code() : static_cast<uint8_t>(errc::actor_failed);
  spdlog::error("{}: {}", actor, cause == errc::actor_failed ? context_of(cause) : describe(cause));
  if (coordinator)
    caf::send_as(caf::actor_cast<caf::actor>(self), coordinator, failure_atom::value, actor,
                 code, ours ? context_of(cause) : describe(cause));
  if (auto* ev = dynamic_cast<caf::event_based_actor*>(self))
    ev->quit(ours
               ? make_error(static_cast<errc>(cause.code()), actor + ": " + context_of(cause))
               : cause);
}

} // namespace flow
} // namespace baton::actors
