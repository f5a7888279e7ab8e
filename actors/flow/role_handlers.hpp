#pragma once

// The handlers every role shares: it observes the coordinator, answers
// heartbeat requests and stops on request (actors/flow/protocols.hpp has
// the messages).

#include <string>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/local_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>


#include "actors/flow/protocols.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// The caller's sender as an actor handle (null if anonymous).
caf::actor sender_of(caf::local_actor* self);

/// The observe handler every role shares: on (observe_atom, coordinator) the
/// actor stores the coordinator in `state.coordinator` (where it sends its
/// reports), monitors it, and quits when it goes down, so that a lost
/// coordinator leaves no actor behind on a node.
template <class State>
auto observe_coordinator(caf::stateful_actor<State>* self) {
  self->set_down_handler([=](const caf::down_msg& msg) {
    if (msg.source == self->state.coordinator.address())
      self->quit(msg.reason);
  });
  return [=](observe_atom, const caf::actor& coordinator) {
    self->state.coordinator = coordinator;
    self->monitor(coordinator);
    self->state.work.send_heartbeats_with(
      [self](int64_t step, int64_t work, const std::string& waiting) {
        self->send(self->state.coordinator, heartbeat_atom::value, self->state.name, step, work,
                   waiting);
      });
    return caf::ok_atom::value;
  };
}

/// The heartbeat request every compute actor answers (the coordinator asks
/// when the job stopped advancing): a heartbeat now, waiting for
/// `state.work`'s waiting_for (or `fallback()` when the actor set none).
/// An actor busy in one long computation or hung does not answer.
template <class State, class Fallback>
auto answer_heartbeat(caf::stateful_actor<State>* self, Fallback fallback) {
  return [=](heartbeat_atom) {
    auto& work = self->state.work;
    work.heartbeat(work.waiting().empty() ? fallback() : std::string{});
  };
}

/// answer_heartbeat with "a message" as what an actor that set no
/// waiting_for waits for.
template <class State>
auto answer_heartbeat(caf::stateful_actor<State>* self) {
  return answer_heartbeat(self, [] { return std::string{"a message"}; });
}

/// The stop handler of the workers and shards (runtime.stop_at_accuracy;
/// a source ends its stream instead): on control shutdown, an actor still training
/// calls `finish`(self), which sends what the run's end sends (its trained
/// count, weights and final report, as they are now), and quits, so that no
/// message in flight makes it train on. Its state has `finished`.
template <class State, class Finish>
auto stop_on_request(caf::stateful_actor<State>* self, Finish finish) {
  return [=](const messages::control& c) {
    if (c.kind != messages::control_kind::shutdown)
      return;
    if (!self->state.finished)
      finish(self);
    self->quit();
  };
}

} // namespace flow
} // namespace baton::actors
