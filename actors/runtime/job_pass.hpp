#pragma once

// The actors of one pass of a job: a pass spawns the plan's actors, wires
// its edges, starts its sources and ends when every actor reported or one
// failed; a restart stops them all and begins a new pass. Driven through the
// coordinator's blocking actor, which monitors every actor.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>
#include <caf/system_messages.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/liveness.hpp"

namespace baton::actors {
inline namespace runtime {

/// An actor the coordinator started.
struct placed_actor {
  std::string name;
  std::string role;
  std::string node; ///< where it runs ("embedded" for the embedded process)
  caf::actor handle;
  bool done = false; ///< its final report arrived
};

/// The actors of the current pass, in plan order.
class job_pass {
public:
  /// A pass driven through `self` (which must outlive this), with `timeout`
  /// for each request but a spawn's, which waits up to `start_timeout`.
  job_pass(caf::blocking_actor* self, std::chrono::milliseconds timeout,
           std::chrono::milliseconds start_timeout)
    : self_(self), timeout_(timeout), start_timeout_(start_timeout) {}

  /// Asks `spawner` (of node `node`, "" the embedded process) to start `a`
  /// with `settings` (the plan's and this pass's run settings) and monitors
  /// it. A node refusing bad input (bad_file, bad_config) is that error,
  /// anything else actor_failed; both say what could not start where, and a
  /// start past `start_timeout` names runtime.start_timeout_ms.
  caf::error spawn(const caf::actor& spawner, const std::string& node, const planned_actor& a,
                   std::string settings);
  /// Tells every actor who its coordinator is (`self`), then introduces the
  /// plan's edges in order: data edges (a sender adds its receivers in that
  /// order) and peer edges (a replica learns its peers).
  caf::error wire(const job_plan& plan);
  /// Sets each delay and drop fault of `edge_faults` on its sender's edge.
  caf::error arm(const std::vector<fault_spec>& edge_faults);
  /// Sends start to the actors `plan` starts.
  void start(const job_plan& plan);

  /// Sends `msg` to `target` and waits for its ok; errc::actor_failed
  /// "`what`: why" when it refuses or does not answer.
  caf::error ask(const caf::actor& target, caf::message msg, const std::string& what);

  /// The actor of this pass at `addr` or named `name`, or nullptr.
  placed_actor* find(const caf::actor_addr& addr);
  placed_actor* find(const std::string& name);
  /// Node (as placed_actor::node) -> actors of this pass spawned there.
  std::map<std::string, size_t> actors_on() const;
  /// Actors whose final report has not arrived.
  size_t unfinished() const;
  /// The same actors, in `plan`'s order, as the stall report names them.
  std::vector<live_actor> unfinished_actors(const job_plan& plan);

  /// A heartbeat of `actor` (at `step`, `work` pieces of work done, waiting
  /// for `waiting`), passed to `live` when the message being handled comes
  /// from that actor of this pass (one of an earlier pass is dropped).
  void heard(liveness& live, const std::string& actor, int64_t step, int64_t work,
             const std::string& waiting);
  /// Asks each of `actors` for a heartbeat and waits up to a second for the
  /// answers (each passed to `live`): an actor that waits for a message
  /// answers with what it waits for; one busy in a computation, or hung,
  /// does not.
  void ask_heartbeats(const std::vector<live_actor>& actors, liveness& live);
  /// Sends `msg` to every actor `plan` starts (the sources, or every worker
  /// and shard) whose final report has not arrived.
  void tell_started(const job_plan& plan, const caf::message& msg);
  /// Counts every actor as done and returns those whose final report had
  /// not arrived (a stop that waited long enough).
  std::vector<std::string> give_up_unfinished();

  /// Stops every actor and waits up to `wait` until they are gone (so that
  /// none writes a checkpoint after this returns), dropping their other
  /// messages; every down message is passed to `on_down` (a node's spawner
  /// may go down meanwhile). The pass is empty after.
  void stop(std::chrono::steady_clock::duration wait,
            const std::function<void(const caf::down_msg&)>& on_down);
  /// Tells every actor to quit, without waiting. The pass is empty after.
  void shutdown();

private:
  caf::blocking_actor* self_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds start_timeout_;
  std::vector<placed_actor> actors_;
};

} // namespace runtime
} // namespace baton::actors
