#pragma once

// Liveness as plain data (runtime.stall_timeout_ms): what the coordinator
// knows of the actors of a pass from their heartbeats, whatever
// runtime.progress_every is. Every compute actor sends one at most once a
// second while it works (activity::add_busy) and when the coordinator asks
// (answer_heartbeat): its step counter, the pieces of work it did and what
// it waits for. The job is stalled when no actor advanced (no step and no
// piece of work) for the stall timeout; the stall report names every actor
// that has not finished, its last step, and what it waits for, or that it
// did not answer (busy in one computation, or hung). No actor system and no
// clock: the coordinator passes the time in.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace baton::actors {
inline namespace runtime {

/// An actor of the pass, as the stall report names it.
struct live_actor {
  std::string name;
  std::string node; ///< "" or "embedded": not named in the report
};

class liveness {
public:
  using clock_type = std::chrono::steady_clock;

  /// A pass begins at `now`: its actors are new (nothing heard from them),
  /// and the job counts as advancing now. Nodes keep when they were heard.
  void start(clock_type::time_point now);

  /// A heartbeat of `actor` on `node` at `now`: at step `step` (-1: none
  /// yet), `work` pieces of work done, waiting for `waiting`. The job
  /// advanced when the step or the work grew.
  void heard(const std::string& actor, const std::string& node, int64_t step, int64_t work,
             const std::string& waiting, clock_type::time_point now);
  /// A report (progress, epoch, final, step, weights) of an actor on `node`
  /// at `now`: the job advanced, and `node` was heard from.
  void reported(const std::string& node, clock_type::time_point now);

  /// Whether no actor advanced for more than `limit` by `now`.
  bool stalled(clock_type::duration limit, clock_type::time_point now) const;
  /// When the job last advanced (the pass's start at the earliest).
  clock_type::time_point last_advanced() const { return advanced_; }
  /// The step of `actor`'s last heartbeat in this pass (-1: none).
  int64_t step_of(const std::string& actor) const;
  /// When `node` was last heard from (any pass), if ever.
  std::optional<clock_type::time_point> last_heard_from(const std::string& node) const;

  /// Forgets who answered a heartbeat request: the coordinator asks now.
  void asking(clock_type::time_point now);
  /// Whether every one of `actors` answered since asking().
  bool all_answered(const std::vector<live_actor>& actors) const;

  /// The stall message of `actors` (those that have not finished) at
  /// `now`, after no actor advanced for `limit`: each with its last step,
  /// since when it did not advance, and what it waits for, or that it did
  /// not answer since asking() (busy in one computation, or hung).
  std::string stall_report(const std::vector<live_actor>& actors, clock_type::duration limit,
                           clock_type::time_point now) const;

private:
  struct actor_state {
    int64_t step = -1;
    int64_t work = -1;
    std::string waiting;
    clock_type::time_point heard;    ///< its last heartbeat
    clock_type::time_point advanced; ///< when its step or work last grew
  };

  std::string describe(const live_actor& a, clock_type::time_point now) const;

  std::map<std::string, actor_state> actors_;
  std::map<std::string, clock_type::time_point> nodes_;
  clock_type::time_point started_;
  clock_type::time_point advanced_; ///< the job's last advance
  clock_type::time_point asked_;    ///< the last heartbeat request
};

/// The warning for a stall timeout `limit` under three heartbeat intervals
/// (`heartbeat`): it can take a healthy actor, between two heartbeats, for a
/// stalled one. None for a longer one.
std::optional<std::string>
short_stall_timeout_warning(std::chrono::steady_clock::duration limit,
                            std::chrono::steady_clock::duration heartbeat);

} // namespace runtime
} // namespace baton::actors
