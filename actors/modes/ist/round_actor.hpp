#pragma once

// What the worker and the shard of job: ist share (both round actors, over
// either subnet scheme): wiring to their peers, the start, and what their
// heartbeat says they wait for. Templates over the actor type, whose state
// names its fields alike (name, coordinator, started, work).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/protocols.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// What a round actor waits for (its heartbeat, activity.hpp): the
/// tensors of round `round` from its `peers` ("shards" or "workers").
inline std::string round_waiting(int64_t round, const std::string& peers) {
  return "the " + peers + "' tensors of round " + std::to_string(round);
}

/// A peer edge: `peer` is the actor's peer number `index` among `peers`
/// ("shards" or "workers", as errors name them).
template <class Actor>
caf::result<caf::ok_atom> set_round_peer(Actor* self, std::vector<caf::actor>& peers,
                                         const caf::actor& peer, int32_t index,
                                         const std::string& what) {
  if (index < 0 || index >= static_cast<int32_t>(peers.size()))
    return make_error(errc::bad_config, self->state.name + ": its peers are " + what + " 0 to " +
                                          std::to_string(peers.size() - 1) + ", not " +
                                          std::to_string(index));
  peers[static_cast<size_t>(index)] = peer;
  return caf::ok_atom::value;
}

/// The start: refused without every peer (named "shard" or "worker");
/// else the activity clock starts and `then` runs guarded.
template <class Actor, class Then>
void start_round_actor(Actor* self, const std::vector<caf::actor>& peers,
                       const std::string& what, const std::string& doing, Then then) {
  auto& st = self->state;
  if (st.started)
    return;
  for (size_t p = 0; p < peers.size(); ++p)
    if (!peers[p])
      return fail(self, st.coordinator, st.name,
                  "started without " + what + " " + std::to_string(p) + " as its peer");
  st.started = true;
  st.work.begin();
  guarded(self, doing, then);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
