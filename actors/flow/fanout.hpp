#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/event_based_actor.hpp>

#include "actors/flow/credit_window.hpp"
#include "actors/flow/turns.hpp"
#include "messages/types.hpp"

namespace baton::actors {
inline namespace flow {

/// How a fanout hands out microbatches.
enum class dealing {
  /// Each microbatch to one receiver, by the replica rule of `fanout`.
  deal,
  /// Every microbatch to every receiver (a frozen stage to every head).
  broadcast,
  /// Each microbatch, evaluation ones too, to receiver `turn_of(id, receivers)` (turns.hpp):
  /// replicas of a frozen backbone, which hold no weights to keep in step
  /// and all evaluate (a head puts their outputs back in id order).
  turns,
};

/// The receivers of an actor's microbatches: the next stage, its replicas,
/// or every head, each behind its own credit window. Controls go to every
/// receiver.
///
/// Dealing is the same rule at every sender: a training microbatch goes to
/// replica `index_in_step % replicas`, an evaluation microbatch to replica 0.
/// So replica j of every replicated stage sees the same share of every
/// minibatch, whichever replica of the stage before sent it, and one replica
/// evaluates (its accuracy is the stage's). Taking turns deals by the
/// microbatch's id alone. Broadcasting sends every microbatch to every
/// receiver, once each receiver has a free slot.
class fanout {
public:
  /// A fanout that deals (the default), takes turns or broadcasts.
  explicit fanout(dealing how = dealing::deal) : dealing_(how) {}

  /// Adds the next receiver (replicas in their order) with `window` slots.
  void add(caf::actor receiver, const std::string& from, const std::string& to, int32_t window);

  size_t size() const { return receivers_.size(); }

  /// Which receiver `m` goes to when dealing or taking turns.
  /// Precondition: size() > 0.
  size_t pick(const messages::microbatch& m) const;

  /// Whether `m` can go: its receiver has a free slot (dealing, turns), or every
  /// receiver has one (broadcasting). False without receivers.
  bool can_send(const messages::microbatch& m) const;

  /// Sends `m` to its receiver, or to every receiver, and counts it.
  /// Precondition: can_send(m).
  void send(caf::event_based_actor* self, messages::microbatch m);

  /// Sends `c` to every receiver (each needs every control, in order).
  void broadcast(caf::event_based_actor* self, const messages::control& c) const;

  /// Credits the slot of microbatch `c.microbatch_id` back to the receiver
  /// it was sent to. Returns "" or, when no receiver has that microbatch in
  /// flight (a confused or malicious peer), why the credit is refused.
  ///
  /// The receiver is the one whose handle is `from` and that has the
  /// microbatch in flight (broadcasting, every receiver has the same ids in
  /// flight). Failing that, the first receiver that has it: CAF 0.17 names
  /// the sender of a remote message by the connection it came over, and once
  /// (CI, 3 node processes) a stage's credits came from a handle other than
  /// its receiver's. Such a credit is logged once.
  std::string take_credit(const caf::actor& from, const messages::credit& c);

  /// Fault injection on the edge to receiver `to`: every message to it
  /// (microbatches and controls, so their order holds) goes `delay` late,
  /// and the first training microbatch of step `drop_step` (-1: none) is
  /// dropped, its slot staying taken. False when `to` is not a receiver.
  bool inject(const std::string& to, std::chrono::milliseconds delay, int64_t drop_step);

  /// Whether the last send() dropped its microbatch (a drop fault), to one
  /// receiver at least.
  bool dropped_last() const { return dropped_last_; }

  /// Traffic per edge, one per receiver.
  std::vector<messages::edge_stats> edges() const;

  /// What the sender waits for, in words: the credits of the receivers
  /// whose window is full ("credits from stage1 (2 in flight)"); "" when
  /// every receiver has a free slot.
  std::string blocked_on() const;

private:
  struct receiver {
    caf::actor handle;
    credit_window window;
    std::vector<int64_t> in_flight; ///< ids of the microbatches sent and not credited
    messages::edge_stats edge;
    std::chrono::milliseconds delay{0};
    int64_t drop_step = -1;
  };
  /// Sends `m` to `r` and counts it, unless a drop fault takes it.
  void send_to(caf::event_based_actor* self, receiver& r, messages::microbatch m);

  /// Why the credit `c` from `from` matches no microbatch in flight.
  std::string refused(const caf::actor& from, const messages::credit& c) const;

  dealing dealing_;
  std::vector<receiver> receivers_;
  bool dropped_last_ = false;
  bool warned_sender_ = false; ///< a credit came from another handle (logged once)
};

} // namespace flow
} // namespace baton::actors
