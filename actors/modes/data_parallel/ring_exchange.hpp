#pragma once

// One worker's side of the ring all-reduce of one step's gradient buckets,
// free of actors: what to send to the ring's successor and what to do with
// what arrives from its predecessor. Plain data, testable without an actor
// system against model::ring_allreduce.
//
// A bucket takes 2 (W - 1) rounds (model/data_parallel.hpp's chunk
// schedule): rounds 0 .. W-2 reduce-scatter (the receiver adds the chunk into
// its own copy, own + received), rounds W-1 .. 2W-3 all-gather (the receiver
// overwrites its copy). Rounds are numbered through the step, bucket after
// bucket. A worker sends round r + 1 right after it applied round r (it needs
// that chunk's sum to send the next), and round 0 when the step begins; so
// every worker sends and receives each round exactly once, in order, and an
// actor ring's result equals model::ring_allreduce bit for bit.
//
//   begin(buckets) -> send m0 -> receive(r0) -> send m1 -> ... -> receive(last) -> done()

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

/// A chunk on its way to the ring's successor.
struct ring_message {
  int32_t round = 0; ///< its round in the step (bucket after bucket)
  at::Tensor chunk;  ///< float32, 1-D, a copy (never a view of a bucket)
};

/// One worker's ring all-reduce of a step's buckets.
class ring_exchange {
public:
  /// Worker `worker` of `workers` (0 <= worker < workers; throws
  /// model::error otherwise).
  ring_exchange(int32_t worker, int32_t workers);

  /// Starts a step with this worker's bucket vectors (flat float32, one per
  /// bucket, each the same size on every worker; copied, never written). Returns the first message
  /// to send, or nothing when there is nothing to exchange (W = 1, no
  /// buckets): then done() already holds.
  std::optional<ring_message> begin(std::vector<at::Tensor> buckets);

  /// Applies the predecessor's message of round `m.round`; returns the next
  /// message to send, if any. Throws model::error when the message is not
  /// the round expected or its chunk has the wrong size or type (nothing is
  /// applied then).
  std::optional<ring_message> receive(const ring_message& m);

  /// Whether every round of the step was received (the buckets hold sums).
  bool done() const { return received_ == rounds(); }
  /// The round the next message from the predecessor must have.
  int32_t expected_round() const { return received_; }
  /// Rounds of the step: 2 (W - 1) per bucket.
  int32_t rounds() const;
  /// The buckets: this worker's gradients before, the sums over every worker
  /// (not yet divided by W) once done().
  const std::vector<at::Tensor>& buckets() const { return buckets_; }

private:
  /// Bucket, chunk range and whether it is the reduce-scatter, of round `r`
  /// as sent (`sending`) or received by this worker.
  struct place {
    size_t bucket = 0;
    model::key_range chunk;
    bool reduce = true;
  };
  place place_of(int32_t round, bool sending) const;
  ring_message message(int32_t round) const;

  int32_t worker_;
  int32_t workers_;
  std::vector<at::Tensor> buckets_;
  std::vector<std::vector<model::key_range>> chunks_; ///< per bucket: ring_chunks
  int32_t received_ = 0;
};

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
