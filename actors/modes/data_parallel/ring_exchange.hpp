#pragma once

// One worker's side of the ring all-reduce of one step's gradient buckets,
// free of actors: what to send to the ring's successor and what to do with
// what arrives from its predecessor. Plain data, testable without an actor
// system against model::ring_allreduce.
//
// A bucket takes 2 (W - 1) rounds (model/data_parallel/data_parallel.hpp's chunk
// schedule): rounds 0 .. W-2 reduce-scatter (the receiver adds the chunk into
// its own copy, own + received; the last of them also divides the chunk's
// sum by W in the same pass, so the chunk goes around as the mean and no
// pass over the whole gradient divides it afterwards), rounds W-1 .. 2W-3
// all-gather (the receiver overwrites its copy). Two workers swap whole
// buckets instead: a bucket's two rounds are its two chunks, both sent when
// it is put (the same bytes: the ring's 2 (W - 1) / W of a bucket is one
// bucket for W = 2), and each worker keeps what it received and takes
// (own + received) / 2 where the mean is read (means(), or the optimizer
// step's own pass over own() and others(): no pass that writes the mean):
// the ring's sum for every element, since x + y is y + x in floating
// point, one message's latency after the backward instead of the
// reduce-scatter's round trip. Rounds are numbered through the step, bucket after
// bucket. A bucket's first round is sent as soon as the bucket is put (during
// the backward, when the worker overlaps: DDP's bucketed all-reduce), any
// other round right after the round before it was applied (it needs that
// chunk's sum). Rounds are applied in number order; one that arrives early
// (the next bucket's first, sent while this worker still reduces the one
// before) waits here. Every chunk's sum is the one model::ring_allreduce
// takes, so an actor ring's result equals it bit for bit whatever the order
// of puts and arrivals, and every mean model::mean_of_sum's (x + y then / W
// in float32, as at::div divides by W).
//
// Messages view the sender's bucket (no copy), whether the successor is in
// this process (it reads the view when it applies the round) or in another
// (CAF's I/O thread serializes the view later): no worker writes a chunk it
// sent before that chunk's mean comes back around the ring, which is after
// the successor read it, and a bucket is never written once done().
//
//   start(sizes) -> put(b, values) -> send m -> receive(m') -> send ... -> done()

#include <cstdint>
#include <map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/data_parallel/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// Two workers: a chunk of the other worker's bucket, as it arrived.
struct other_chunk {
  model::key_range range; ///< its elements in the bucket
  at::Tensor values;      ///< float32, 1-D
};

/// A chunk on its way to the ring's successor.
struct ring_message {
  int32_t round = 0; ///< its round in the step (bucket after bucket)
  at::Tensor chunk; ///< float32, 1-D: a view of the sender's bucket
};

/// One worker's ring all-reduce of a step's buckets.
class ring_exchange {
public:
  /// Worker `worker` of `workers` (0 <= worker < workers; throws
  /// model::error otherwise).
  ring_exchange(int32_t worker, int32_t workers);

  /// Starts a step whose buckets have these sizes (float32 elements, the
  /// same on every worker); none of them is here yet.
  void start(const std::vector<int64_t>& sizes);

  /// Bucket `b`'s values on this worker (flat float32 of its size). Taken,
  /// and summed into in place: pass a tensor nobody else reads (a
  /// torch::cat). Returns what to send: its first round (none when W = 1)
  /// and any round its arrival lets follow. Throws model::error on a bucket
  /// put twice, out of range or of the wrong size.
  std::vector<ring_message> put(size_t b, at::Tensor values);

  /// start() with the buckets' sizes, then put() of each in order.
  std::vector<ring_message> begin(std::vector<at::Tensor> buckets);

  /// The predecessor's message of round `m.round`: applied now when it is
  /// the next round and its bucket is here, else kept until it is; returns
  /// what the rounds applied let be sent. Throws model::error when the round
  /// was received already or the step has no such round, or its chunk has
  /// the wrong size or type (nothing is kept then).
  std::vector<ring_message> receive(ring_message m);

  /// Whether every bucket was put and every round applied (the buckets hold means).
  bool done() const { return put_ == buckets_.size() && received_ == rounds(); }
  /// The round to be applied next.
  int32_t expected_round() const { return received_; }
  /// Rounds of the step: 2 (W - 1) per bucket.
  int32_t rounds() const;
  /// Once done(), the buckets' means over every worker (sum / W,
  /// model::mean_of_sum's bits); two workers' are made on the first call.
  const std::vector<at::Tensor>& means();

  /// Whether the two workers swap whole buckets (W = 2): own() and others()
  /// then hold the step's values, each bucket's mean (own + other) / 2.
  bool swaps() const { return workers_ == 2; }
  /// Two workers: this worker's buckets, as put.
  const std::vector<at::Tensor>& own() const { return buckets_; }
  /// Two workers, once done(): per bucket, the other worker's chunks.
  const std::vector<std::vector<other_chunk>>& others() const { return others_; }

  /// Drops the other worker's chunks and the means made of them once the
  /// step has read them (shared-memory slabs go back to their writer).
  void release();

private:
  /// Bucket, chunk range and whether it is the reduce-scatter (and its last
  /// round, which divides), of round `r` as sent (`sending`) or received by
  /// this worker.
  struct place {
    size_t bucket = 0;
    model::key_range chunk;
    bool reduce = true;
    bool last_reduce = false;
  };
  place place_of(int32_t round, bool sending) const;
  int32_t per_bucket() const;
  ring_message message(int32_t round) const;
  /// Applies the kept rounds that can be, in order; appends what follows.
  void apply_kept(std::vector<ring_message>& out);

  int32_t worker_;
  int32_t workers_;
  std::vector<at::Tensor> buckets_;                   ///< undefined until put
  std::vector<at::Tensor> means_; ///< two workers: per bucket, its mean once asked
  std::vector<std::vector<other_chunk>> others_; ///< two workers: per bucket, as received
  std::vector<std::vector<model::key_range>> chunks_; ///< per bucket: ring_chunks
  size_t put_ = 0;
  int32_t received_ = 0;
  std::map<int32_t, at::Tensor> kept_; ///< rounds arrived before their turn
};

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
