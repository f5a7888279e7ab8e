#pragma once

// What an actor's work measured: busy and idle time and CPU time
// (cpu_time.hpp), reported in its actor_report. An activity also carries the
// actor's heartbeats (heartbeats.hpp): each piece of work it measures is one
// the heartbeats count, and it is what the role handlers reach as `work`.

#include <chrono>
#include <string>

#include "actors/flow/cpu_time.hpp"
#include "actors/flow/heartbeats.hpp"
#include "messages/crossing_cpu.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// Busy/idle accounting of one actor: busy is time spent computing, idle the
/// rest of the time since the first piece of work arrived. Optionally also
/// CPU time: the actor's thread inside its computations (compute_scope), and
/// its whole process since the first piece of work, so that what the process
/// spends beyond the computations (messages, serialisation, sockets, other
/// actors) can be told.
class activity : public heartbeats {
public:
  using clock = heartbeats::clock;

  /// Marks the start of the actor's working life (idempotent).
  void begin() {
    if (!started_) {
      started_ = true;
      first_ = clock::now();
      process_cpu_at_begin_ = process_cpu_seconds();
      crossing_at_begin_ = messages::crossing_cpu_so_far();
    }
  }
  /// Adds the time since `since` to busy time: a piece of work is done (a
  /// heartbeat goes out when one is due).
  void add_busy(clock::time_point since) {
    auto now = clock::now();
    busy_ += now - since;
    count_work(now);
  }
  /// Adds the calling thread's CPU seconds since `since` (a reading of
  /// thread_cpu_seconds()) to compute CPU time.
  void add_compute_cpu(double since) { compute_cpu_ += thread_cpu_seconds() - since; }

  double compute_cpu_seconds() const { return compute_cpu_; }
  /// The process's CPU seconds since begin() (0 before).
  double process_cpu_seconds_since_begin() const {
    return started_ ? process_cpu_seconds() - process_cpu_at_begin_ : 0;
  }

  /// The CPU seconds the process spent on crossing messages since begin().
  messages::crossing_cpu crossing_cpu_since_begin() const {
    if (!started_)
      return {};
    auto now = messages::crossing_cpu_so_far();
    return {now.serialisation - crossing_at_begin_.serialisation,
            now.wire - crossing_at_begin_.wire};
  }

  double busy_seconds() const { return std::chrono::duration<double>(busy_).count(); }
  double idle_seconds() const {
    if (!started_)
      return 0;
    return std::chrono::duration<double>(clock::now() - first_ - busy_).count();
  }

private:
  bool started_ = false;
  clock::time_point first_;
  clock::duration busy_{0};
  double compute_cpu_ = 0;
  double process_cpu_at_begin_ = 0;
  messages::crossing_cpu crossing_at_begin_;
};

/// A report of actor `actor` (role `role`, on `node`) with what its
/// activity measured: busy, idle, compute CPU and process CPU seconds, and
/// when its process sent or received messages of other processes, the
/// figures "serialisation_cpu_seconds" and "wire_cpu_seconds" (the
/// process's, since begin()).
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
