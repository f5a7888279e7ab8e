#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/atom.hpp>
#include <caf/local_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>

#include "actors/flow/error_of.hpp"
#include "actors/flow/interfaces.hpp"

#include "messages/errc.hpp"
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

/// Running sums of one epoch of a trainable actor that has a loss.
struct epoch_sums {
  double loss_sum = 0;  ///< sum over microbatches of mean loss * samples
  int64_t samples = 0;  ///< training samples
  int64_t correct = 0;  ///< correct predictions on the test split
  int64_t evaluated = 0;///< test samples evaluated

  /// The epoch's result (mean loss, accuracy); the sums start over.
  messages::epoch_result close(int32_t epoch) {
    messages::epoch_result e{epoch, samples ? loss_sum / samples : 0.0,
                             evaluated ? static_cast<double>(correct) / evaluated : 0.0,
                             samples};
    *this = {};
    return e;
  }
};

/// Sets the torch intra-op thread budget of the calling thread, once per
/// thread (each detached actor owns its thread and its OpenMP team).
void use_thread_budget(int32_t threads);

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

/// The labels of task `task` in `m`, or nullptr when it carries none.
const at::Tensor* task_labels_of(const messages::microbatch& m, const std::string& task);

/// Tells the coordinator that `actor` failed and why, then quits `self`
/// (errc::actor_failed: the run fails with that code).
void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const std::string& what);

/// Same, for a failure whose cause is an error value (error_of): the
/// coordinator is told its code, with which the run fails (a LibTorch error
/// is compute_failed, a file bad_file), and its text, which names the code
/// unless it is actor_failed ("compute_failed: forward: ..."); `self` quits
/// with it.
void fail(caf::local_actor* self, const caf::actor& coordinator, const std::string& actor,
          const caf::error& cause);

/// Runs `f`; an exception fails the actor (its state has `coordinator`,
/// `name` and `work`) with error_of(exception, `what`): a LibTorch error is
/// compute_failed, a model file error bad_file. A heartbeat goes first, so
/// that the coordinator knows the step the failure came at (an error that
/// recurs at the same step after a restart is not retried). Whether `f`
/// succeeded.
template <class Self, class F>
bool guarded(Self* self, const std::string& what, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    self->state.work.heartbeat("nothing: it failed");
    fail(self, self->state.coordinator, self->state.name, error_of(e, what));
    return false;
  }
}

/// `sys.spawn<caf::detached>(fun, xs...)` for the actor called `name`; a
/// thread that cannot be created (the process or its user is at its thread
/// limit) is an error value instead of an exception.
///
/// CAF 0.17 counts the actor as running and its thread as a detached thread
/// before it creates the thread, and uncounts neither when that fails:
/// ~actor_system then waited for them forever (a run that could not start a
/// head hung). Both counts are given back; the actor that never ran stays
/// allocated (its private thread object holds a reference to it).
template <class F, class... Ts>
caf::expected<caf::actor> spawn_detached(caf::actor_system& sys, const std::string& name, F fun,
                                         Ts&&... xs) {
  try {
    return sys.spawn<caf::detached>(fun, std::forward<Ts>(xs)...);
  } catch (const std::system_error& e) {
    sys.registry().dec_running();
    sys.dec_detached_threads();
    return make_error(errc::actor_failed,
                      name + ": cannot start its thread (" + e.what() +
                        "): the process is at its thread limit (see ulimit -u); run fewer "
                        "actors on this node");
  }
}

} // namespace flow
} // namespace baton::actors
