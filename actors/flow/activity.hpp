#pragma once

// What an actor's work measured: busy and idle time, CPU time, and the
// heartbeats that tell the coordinator it advances (actors/runtime/liveness.hpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// CPU seconds (user + system) of the calling thread.
double thread_cpu_seconds();

/// CPU seconds (user + system) of this process, every thread.
double process_cpu_seconds();

/// Busy/idle accounting of one actor: busy is time spent computing, idle the
/// rest of the time since the first piece of work arrived. Optionally also
/// CPU time: the actor's thread inside its computations (compute_scope), and
/// its whole process since the first piece of work, so that what the process
/// spends beyond the computations (messages, serialisation, sockets, other
/// actors) can be told.
class activity {
public:
  using clock = std::chrono::steady_clock;

  /// Marks the start of the actor's working life (idempotent).
  void begin() {
    if (!started_) {
      started_ = true;
      first_ = clock::now();
      process_cpu_at_begin_ = process_cpu_seconds();
    }
  }
  /// Adds the time since `since` to busy time: a piece of work is done (a
  /// heartbeat goes out when one is due).
  void add_busy(clock::time_point since) {
    auto now = clock::now();
    busy_ += now - since;
    work_done_ += 1;
    if (now - last_heartbeat_ >= heartbeat_interval)
      heartbeat();
  }
  /// Adds the calling thread's CPU seconds since `since` (a reading of
  /// thread_cpu_seconds()) to compute CPU time.
  void add_compute_cpu(double since) { compute_cpu_ += thread_cpu_seconds() - since; }

  double compute_cpu_seconds() const { return compute_cpu_; }
  /// The process's CPU seconds since begin() (0 before).
  double process_cpu_seconds_since_begin() const {
    return started_ ? process_cpu_seconds() - process_cpu_at_begin_ : 0;
  }

  double busy_seconds() const { return std::chrono::duration<double>(busy_).count(); }
  double idle_seconds() const {
    if (!started_)
      return 0;
    return std::chrono::duration<double>(clock::now() - first_ - busy_).count();
  }

  // -- liveness (runtime.stall_timeout_ms) ------------------------------------

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
  int64_t work_done() const { return work_done_; } ///< add_busy calls

private:
  bool started_ = false;
  clock::time_point first_;
  clock::duration busy_{0};
  double compute_cpu_ = 0;
  double process_cpu_at_begin_ = 0;
  int64_t step_ = -1;
  int64_t work_done_ = 0;
  std::string waiting_;
  clock::time_point last_heartbeat_;
  heartbeat_sender heartbeat_;
};

/// A report of actor `actor` (role `role`, on `node`) with what its
/// activity measured: busy, idle, compute CPU and process CPU seconds.
messages::actor_report activity_report(std::string actor, std::string role, std::string node,
                                       const activity& work);

/// Counts the calling thread's CPU time during its lifetime as compute.
class compute_scope {
public:
  explicit compute_scope(activity& a) : activity_(a), since_(thread_cpu_seconds()) {}
  ~compute_scope() { activity_.add_compute_cpu(since_); }
  compute_scope(const compute_scope&) = delete;
  compute_scope& operator=(const compute_scope&) = delete;

private:
  activity& activity_;
  double since_;
};

} // namespace flow
} // namespace baton::actors
