#pragma once

// Whether the nodes of a job are alive, as the coordinator judges it itself
// rather than through CAF's connection timeout. CAF 0.17 closes a connection
// whose peer sent nothing for `middleman.connection-timeout`, and a closed
// connection cannot be reopened: every proxy over it dies. That cannot tell
// a node that is gone from one that is only slow or paused (a straggler, a
// SIGSTOP, the coordinator's own Ctrl-Z), and it ended every run in which a
// process stood still for 2 s. So the coordinator's process and its local
// nodes never close a silent connection (jobs.cpp), and this watch decides:
//
//   a node is GONE when its connection closes (killed process: CAF's down
//   message, in ms), or when it has been silent for `lost`;
//   a node is LATE (slow: process alive or host reachable, only quiet) when
//   it has been silent for `late`, and warned about until it answers.
//
//   watch actor (coordinator's process)        node process
//     every `interval`: (pulse_atom)   ---->   pulse actor (spawner.hpp)
//                                      <----   (pulse_atom)
//     silent >= late: (late_atom, node, ms) to the coordinator, again every
//     report_every while silent; silent >= lost: the last one, node dropped
//     an answer after late: (back_atom, node, ms)
//
// A tick that comes far later than scheduled means this process did not run
// (SIGSTOP, Ctrl-Z, starved): nobody could be heard meanwhile, so every node
// gets a fresh `late` from that moment instead of being judged on the gap.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include "actors/config/topology.hpp"

namespace baton::actors {
inline namespace runtime {

/// To the coordinator: (late_atom, string node, int64 silent_ms).
using late_atom = caf::atom_constant<caf::atom("late")>;
/// To the coordinator: (back_atom, string node, int64 silent_ms), a late node answered.
using back_atom = caf::atom_constant<caf::atom("back")>;

/// When a silent node counts as late and as lost.
struct liveness_limits {
  /// Between pings: runtime.heartbeat_ms, at most a quarter of `late`.
  std::chrono::milliseconds interval{200};
  std::chrono::milliseconds late{2000};    ///< runtime.connection_timeout_ms
  /// Silent this long: lost. A job that recovers gives up at `late` (it
  /// restarts from its checkpoints); one that cannot waits up to
  /// runtime.slow_node_timeout_ms.
  std::chrono::milliseconds lost{2000};
  std::chrono::milliseconds report_every{5000}; ///< a late node is warned about again
};

/// The limits of a job on cluster `c`.
liveness_limits liveness_limits_of(const cluster& c);

/// What the watch tells the coordinator.
struct liveness_event {
  bool back = false;   ///< false: late (lost when silent >= limits.lost)
  std::string node;
  std::chrono::milliseconds silent{0};
};

/// The watch's judgement as plain data (no actor system; the caller passes
/// the time in).
class node_liveness {
public:
  using clock_type = std::chrono::steady_clock;

  node_liveness(liveness_limits limits, clock_type::time_point now)
    : limits_(limits), last_tick_(now) {}

  /// Watches `node`, heard at `now`.
  void add(const std::string& node, clock_type::time_point now);
  /// A tick at `now`: first, how long this process did not run, when the
  /// tick is late by more than max(3 intervals, late / 2) (every node is
  /// then heard anew at `now`); then the late and lost nodes to report.
  /// A lost node is reported once and no longer watched.
  std::vector<liveness_event> tick(clock_type::time_point now,
                                   std::chrono::milliseconds& paused);
  /// `node` answered at `now`: a back event when it was late.
  std::optional<liveness_event> heard(const std::string& node, clock_type::time_point now);
  /// The nodes still watched.
  std::vector<std::string> watched() const;

private:
  struct peer {
    std::string node;
    clock_type::time_point heard;
    clock_type::time_point reported; ///< last late event
    bool late = false;
  };

  /// The event for `p` at `now`, if one is due.
  std::optional<liveness_event> judge(peer& p, clock_type::time_point now);

  liveness_limits limits_;
  clock_type::time_point last_tick_;
  std::vector<peer> peers_;
};

/// Spawns the watch (hidden: shutdown does not wait for it) over `pulses`
/// (node name, its pulse actor); its events go to `coordinator`. End it with
/// an exit message.
caf::actor spawn_node_watch(caf::actor_system& sys, const caf::actor& coordinator,
                            liveness_limits limits,
                            std::vector<std::pair<std::string, caf::actor>> pulses);

} // namespace runtime
} // namespace baton::actors
