#pragma once

// The heartbeats that tell the coordinator an actor advances
// (runtime.stall_timeout_ms; actors/runtime/liveness.hpp): the actor's step
// counter, the pieces of work it did and what it waits for, sent at most
// once a second while it works, and on request.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace baton::actors {
inline namespace flow {

/// An actor's liveness: what its next heartbeat says, and when one is due.
class heartbeats {
public:
  using clock = std::chrono::steady_clock;

  /// The most time between two heartbeats of an actor that works.
  static constexpr std::chrono::seconds heartbeat_interval{1};

  /// Sends one heartbeat: the step counter, the pieces of work done, and
  /// what the actor waits for.
  using heartbeat_sender =
    std::function<void(int64_t step, int64_t work, const std::string& waiting)>;

  /// Where heartbeats go (observe_coordinator sets it: to the coordinator).
  void send_heartbeats_with(heartbeat_sender send) { heartbeat_ = std::move(send); }
  /// The actor's step counter is now `step` (after_step sets it).
  void advanced_to(int64_t step) { step_ = step; }
  /// What the actor waits for when it returns to its mailbox, in words
  /// ("ring chunks of step 7 from worker1"); "" when it cannot tell.
  void waiting_for(std::string what) { waiting_ = std::move(what); }
  /// Sends a heartbeat now, with `waiting` ("": waiting_for's) as what the
  /// actor waits for.
  void heartbeat(const std::string& waiting = {}) {
    last_heartbeat_ = clock::now();
    if (heartbeat_)
      heartbeat_(step_, work_done_, waiting.empty() ? waiting_ : waiting);
  }

  int64_t step() const { return step_; }           ///< -1 before its first step
  const std::string& waiting() const { return waiting_; }
  int64_t work_done() const { return work_done_; } ///< pieces of work counted

protected:
  /// A piece of work is done at `now`: counted, and a heartbeat goes out
  /// when one is due.
  void count_work(clock::time_point now) {
    work_done_ += 1;
    if (now - last_heartbeat_ >= heartbeat_interval)
      heartbeat();
  }

private:
  int64_t step_ = -1;
  int64_t work_done_ = 0;
  std::string waiting_;
  clock::time_point last_heartbeat_;
  heartbeat_sender heartbeat_;
};

} // namespace flow
} // namespace baton::actors
