#pragma once

// The order in which a stage under a repeatable schedule (static 1F1B, gpipe,
// 1f1b-flush) takes the microbatches that several upstream replicas send it.
// Plain data, no CAF, no tensors: the stage holds the microbatches, this says
// when the lowest held one may go.

#include <cstdint>

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// Where a microbatch stands in the source's order (messages::microbatch's
/// fields of it).
struct microbatch_position {
  int64_t step = 0;          ///< training step (minibatch) of the run
  int32_t index_in_step = 0; ///< position within its minibatch
  int32_t step_size = 1;     ///< microbatches in its minibatch
  bool eval = false;         ///< evaluation: after every training microbatch of its epoch
};

/// Microbatches of a `size`-microbatch step that replica `r` of `n` gets
/// (fanout's dealing: training microbatch i goes to replica i % n).
inline int32_t share_of(int32_t size, int32_t r, int32_t n) {
  return size > r ? (size - 1 - r) / n + 1 : 0;
}

/// The source's order (microbatch ids) of the microbatches dealt to replica
/// `replica` of `replicas`, whatever the order in which several senders'
/// microbatches arrive. Each sender's microbatches arrive in id order; the
/// training microbatch at index i of a step comes from upstream replica
/// i % (upstream replicas) and goes to replica i % replicas, evaluation ones
/// from and to replica 0 (fanout's dealing). So the lowest held id may go
/// when every microbatch of this replica's share before it has gone:
///   - a training microbatch: the ones before it in its step (this replica's
///     indices replica, replica + replicas, ...), and the whole share of the
///     step before, when it is the first of its step. A step this replica
///     never saw had no share: its first index (= replica) comes from the
///     same sender as the next step's first, which would have arrived first;
///   - an evaluation microbatch: the whole share of the last step seen (its
///     first index came from replica 0, the evaluation's sender).
/// Controls are not ordered here: a control is complete once every sender
/// sent its copy, and then every microbatch before it has arrived.
class input_order {
public:
  /// For replica `replica` of a stage of `replicas` (1: unreplicated).
  input_order(int32_t replica, int32_t replicas) : replica_(replica), replicas_(replicas) {}

  /// Whether the microbatch at `p`, the lowest id held, may go now.
  bool ready(const microbatch_position& p) const {
    if (p.eval || p.step > step_)
      return share_done() && (p.eval || p.index_in_step == replica_);
    if (p.step < step_)
      return true; // not in the order at all: let the stage refuse it
    return taken_ == (p.index_in_step - replica_) / replicas_;
  }

  /// Counts the microbatch at `p` as gone.
  void take(const microbatch_position& p) {
    if (p.eval)
      return;
    if (p.step != step_) {
      step_ = p.step;
      taken_ = 0;
      share_ = share_of(p.step_size);
    }
    taken_ += 1;
  }

  /// Microbatches of a `size`-microbatch step that this replica gets.
  int32_t share_of(int32_t size) const { return pipeline::share_of(size, replica_, replicas_); }

private:
  bool share_done() const { return taken_ == share_; }

  int32_t replica_;
  int32_t replicas_;
  int64_t step_ = -1; ///< the step of the last training microbatch taken
  int32_t taken_ = 0; ///< of this replica's share of step_
  int32_t share_ = 0; ///< this replica's share of step_
};

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
