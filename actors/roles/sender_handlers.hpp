#pragma once

// The handlers of an actor that sends microbatches under credit windows
// (a source, a frozen stage): wiring, credits, edge faults, heartbeats.

#include <string>

#include <caf/actor.hpp>
#include <caf/message_handler.hpp>

#include "actors/flow/failure.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/roles/injected_faults.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace roles {

/// The handlers every sender of microbatches shares (`state.downstream` a
/// fanout, `state.spec.window` its credit window): (connect_atom, receiver,
/// name) adds a receiver; (fault_atom, kind, to, value) sets a delay or drop
/// fault on an edge (inject_edge_fault); a credit frees the slot of its
/// microbatch, then `next()` runs; a credit the fanout refuses fails the
/// actor; (heartbeat_atom) answers with a heartbeat that names the credits
/// it waits for (answer_heartbeat). Put before the actor's own handlers with
/// or_else.
template <class Actor, class Next>
caf::message_handler sender_handlers(Actor* self, Next next) {
  return {
    answer_heartbeat(self, [=] {
      auto credits = self->state.downstream.blocked_on();
      return credits.empty() ? std::string{"its input (no credit window is full)"}
                             : credits;
    }),
    [=](connect_atom, const caf::actor& downstream, const std::string& name) {
      auto& st = self->state;
      st.downstream.add(downstream, st.name, name, st.spec.window);
      return caf::ok_atom::value;
    },
    [=](fault_atom, const std::string& kind, const std::string& to, int64_t value) {
      return inject_edge_fault(self->state.downstream, self->state.name, kind, to, value);
    },
    [=](const messages::credit& c) {
      auto& st = self->state;
      if (auto refused = st.downstream.take_credit(sender_of(self), c); !refused.empty())
        return fail(self, st.coordinator, st.name, "refused " + refused);
      next();
    },
  };
}

} // namespace roles
} // namespace baton::actors
