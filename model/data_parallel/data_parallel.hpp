#pragma once

// The numerics of the data-parallel mode, free of actors: how an epoch is
// shared among W workers, how the parameters are laid out as one flat key
// space cut into shard ranges (parameter server) or ring chunks (all-reduce),
// the order in which a ring sums, DDP's gradient buckets, the scaled and
// warmed-up learning rate, and `run_data_parallel_local`, the one-process
// reference the actor mode is checked against.
//
// Conventions the actors must follow to match the reference bit for bit:
// - a worker's gradient is the gradient of its minibatch's mean loss; the
//   exchanged gradient is the sum over workers divided by W (at::div, after
//   the sum, never before);
// - ring: every bucket is all-reduced on its own, cut into W chunks
//   (ring_chunks), summed in the ring's order (ring_allreduce); the order of an
//   element's terms depends on its chunk, so the buckets and chunks must be
//   these ones;
// - ps: a shard sums the W pushes in worker order 0, 1, ..., W-1
//   (worker_order_sum), whatever order they arrive in;
// - every worker (ring, in place: optimizer_step_in_place) or shard (ps)
//   steps with the optimizer's arithmetic (model/core/optimizer.hpp: sgd,
//   adam, adamw), which is per element: stepping a slice of the flat vector
//   gives the bits of stepping the whole parameter; sgd's momentum buffer
//   starts as the first gradient (torch's `first`); clip_grad_norm, when
//   asked, scales the reduced gradient over the trainable keys first (not
//   with ps: a shard has its key range only, the section refuses it);
// - local SGD averages the trainable weights through the same buckets and
//   summation, divided by W; the optimizer state (momentum, Adam's moments)
//   stays per worker, never averaged: after an average each worker's moments
//   are still those of its own gradients;
// - a frozen prefix runs in evaluation mode under NoGradGuard, in canonical
//   blocks of data_parallel_settings::feature_block rows (frozen_features), with
//   or without the feature cache;
// - batch norm buffers stay per worker; the final model and the evaluation
//   are worker 0's.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/core/feature_cache.hpp"
#include "model/core/freezing.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/training.hpp"
#include "model/core/warm_up.hpp"
#include "model/data_parallel/worker_data.hpp"

namespace baton::model {

// Worker shares of an epoch: worker_data.hpp.

// -- the flat key space -----------------------------------------------------------

/// A contiguous range [begin, end) of elements of the flat parameter vector.
struct key_range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const key_range& o) const { return begin == o.begin && end == o.end; }
};

/// One parameter's place in the flat key space.
struct parameter_key {
  std::string name;         ///< "layer.param", as named_parameters() names it
  size_t layer = 0;         ///< index of its (first, when tied) layer in the model
  key_range range;          ///< its elements in the flat vector
  std::vector<int64_t> shape;
  /// Kept out of training by its TorchScript file (requires_grad False
  /// when saved): exchanged as zeros like any key, never stepped.
  bool fixed = false;
};

/// The model's parameters, in named_parameters() order, laid end to end as
/// one float32 vector of `numel` elements: a tensor tied between layers is
/// one key, in its first layer. The frozen prefix (the parameters whose
/// first layer is in [0, frozen_layers)) is the range [0, frozen_numel).
struct flat_layout {
  std::vector<parameter_key> keys;
  int64_t numel = 0;
  size_t frozen_layers = 0;
  int64_t frozen_numel = 0;
  /// The range of the frozen prefix's keys: never pushed, reduced or pulled.
  key_range frozen() const { return {0, frozen_numel}; }
  /// The trainable keys: [frozen_numel, numel).
  key_range trainable() const { return {frozen_numel, numel}; }
};

/// The layout of `m` with its first `frozen_layers` layers frozen. Throws
/// model::error when a parameter is not float32 (the flat vector is one
/// dtype, so balancing by elements is balancing by bytes) or when
/// frozen_layers > m.size().
flat_layout make_flat_layout(const layered_model& m, size_t frozen_layers = 0);

/// `shards` contiguous ranges covering [0, layout.numel) exactly once, equal
/// in bytes up to one element (the first numel % shards are one longer), as
/// ps-lite splits its key space: a parameter may span two (or, when tiny,
/// more) shards. Throws model::error unless shards >= 1.
std::vector<key_range> shard_ranges(const flat_layout& layout, int32_t shards);

/// The part of `range` a shard really exchanges: its intersection with the
/// trainable keys. Empty when the whole range is frozen: that shard is idle.
key_range trainable_part(const key_range& range, const flat_layout& layout);

/// The indices of the keys that `range` touches, in key order.
std::vector<size_t> keys_in(const key_range& range, const flat_layout& layout);

/// The part of one key that a range covers: `size` elements from `in_key` in
/// the key, at `in_range` in the range.
struct key_piece {
  size_t key = 0;
  int64_t in_key = 0;
  int64_t in_range = 0;
  int64_t size = 0;
};

/// The pieces of `range`, one per key it touches, in key order.
std::vector<key_piece> key_pieces(const key_range& range, const flat_layout& layout);

/// One flat float32 vector of `tensors` (each flattened, in order); an
/// undefined tensor (a parameter without a gradient) contributes zeros of
/// its key's size. Precondition: tensors.size() == layout.keys.size().
at::Tensor flatten(const std::vector<at::Tensor>& tensors, const flat_layout& layout);

/// Elements `range` of flatten(tensors, layout), copied once into a vector of its own
/// (no flat vector of every key in between): `out` when given (range.size() float32
/// elements, contiguous), else a new one.
at::Tensor flatten_range(const std::vector<at::Tensor>& tensors, const flat_layout& layout,
                         const key_range& range, at::Tensor out = {});

/// The tensors of `flat` per key, shaped as the parameters, copied.
std::vector<at::Tensor> unflatten(const at::Tensor& flat, const flat_layout& layout);

/// Elements `range` of `flat`, as a view (no copy: clone it to keep it).
at::Tensor slice(const at::Tensor& flat, const key_range& range);

/// Writes `values` (range.size() elements) into elements `range` of `flat`.
void write_slice(at::Tensor& flat, const key_range& range, const at::Tensor& values);

// -- ring all-reduce ----------------------------------------------------------------

/// The W chunks of a vector of `numel` elements: contiguous, in order, sizes
/// differing by at most one (the first numel % W are one longer; some are
/// empty when numel < W). Throws model::error unless workers >= 1.
std::vector<key_range> ring_chunks(int64_t numel, int32_t workers);

/// Worker w's successor on the ring, (w + 1) mod W: where it sends.
int32_t ring_next(int32_t worker, int32_t workers);
/// Worker w's predecessor, (w - 1) mod W: where it receives from.
int32_t ring_previous(int32_t worker, int32_t workers);

/// Reduce-scatter, step k in [0, W-1): worker w sends its partial sum of
/// chunk (w - k) mod W to ring_next(w), which adds it into its own copy of
/// that chunk (own + received). After W-1 steps worker w holds the full sum
/// of chunk (w + 1) mod W, whose terms were added in the order
/// g_c, g_{c+1}, ..., g_{c-1} (c the chunk, worker indices mod W).
int32_t reduce_scatter_send_chunk(int32_t worker, int32_t step, int32_t workers);
/// The chunk worker w receives (and adds into) at reduce-scatter step k:
/// (w - 1 - k) mod W.
int32_t reduce_scatter_receive_chunk(int32_t worker, int32_t step, int32_t workers);
/// All-gather, step k in [0, W-1): worker w sends the full sum of chunk
/// (w + 1 - k) mod W to ring_next(w), which overwrites its copy with it.
int32_t all_gather_send_chunk(int32_t worker, int32_t step, int32_t workers);
/// The chunk worker w receives (and overwrites) at all-gather step k:
/// (w - k) mod W.
int32_t all_gather_receive_chunk(int32_t worker, int32_t step, int32_t workers);

/// Bytes worker w sends in one all-reduce of `numel` elements of
/// `element_bytes` each: every chunk but (w + 1) mod W in the reduce-scatter
/// and every chunk but (w + 2) mod W in the all-gather. 0 when W == 1.
int64_t ring_bytes_sent(int64_t numel, int64_t element_bytes, int32_t worker, int32_t workers);
/// The theory the bench prints next to it: 2 (W - 1) / W x `bytes`.
double ring_bytes_theory(double bytes, int32_t workers);

/// The sum of W workers' vectors (same size, float32, one per worker in
/// worker order) computed exactly as the ring does: reduce-scatter then
/// all-gather over ring_chunks, every addition in its order. What every
/// worker holds at the end; an actor ring's result equals it bit for bit.
/// A fresh tensor, except for one worker: then its own vector, flat.
/// Throws model::error on an empty list or mismatched sizes.
at::Tensor ring_allreduce(const std::vector<at::Tensor>& inputs);

/// The sum in worker order, ((g_0 + g_1) + g_2) + ...: what a shard computes
/// from the W pushes of its range (it waits for all of them, then adds).
at::Tensor worker_order_sum(const std::vector<at::Tensor>& inputs);

// -- gradient buckets ---------------------------------------------------------------

/// A group of parameters all-reduced together, as DDP's buckets: keys taken
/// in reverse parameter order (the order backward produces their gradients),
/// a bucket closed once it holds at least `bucket_mb` MiB; a parameter is
/// never split. Its flat vector is its keys' tensors concatenated in the
/// bucket's (reverse) order.
struct bucket {
  std::vector<size_t> keys; ///< indices into flat_layout::keys, reverse order
  int64_t numel = 0;
};

/// The buckets of the trainable keys (frozen keys are in none: no gradient,
/// no traffic). Default 25 MiB, as DDP's bucket_cap_mb. Throws model::error
/// unless bucket_mb > 0.
std::vector<bucket> make_buckets(const flat_layout& layout, double bucket_mb = 25);

/// The mean of W workers' summed vector: `sum` / W, out of place (for one
/// worker `sum` itself: dividing by 1 changes no bit).
at::Tensor mean_of_sum(const at::Tensor& sum, int32_t workers);

/// out = (a + b) / workers, element by element in one pass: the sum as
/// ring_allreduce adds two values, then divided as mean_of_sum's at::div
/// divides (float32 operations both, so the same bits). `out` may be `a`.
void mean_of_two(const at::Tensor& a, const at::Tensor& b, int32_t workers, at::Tensor& out);

/// A bucket's flat vector from per-key tensors (undefined ones as zeros).
at::Tensor bucket_flat(const bucket& b, const flat_layout& layout,
                       const std::vector<at::Tensor>& per_key);

/// Writes a bucket's flat vector back into per-key tensors (shaped as the
/// parameters): copied into defined entries; undefined ones become views of
/// `flat` (no copy), so the caller must not write `flat` afterwards.
void scatter_bucket(const bucket& b, const flat_layout& layout, const at::Tensor& flat,
                    std::vector<at::Tensor>& per_key);

// -- learning rate ---------------------------------------------------------------

/// The learning rate of large-minibatch SGD (Goyal et al.): with linear
/// scaling the target is lr x global_batch / base_batch; warmup ramps it
/// linearly from lr (at step 0) to the target (reached at step
/// warmup_epochs x steps_per_epoch) and keeps the target after.
struct lr_schedule {
  double lr = 0.05;            ///< optimizer.lr: the rate for base_batch
  bool linear_scaling = false; ///< optimizer.lr_scaling: linear
  int64_t global_batch = 0;    ///< W x batch_size
  int64_t base_batch = 256;    ///< optimizer.base_batch
  double warmup_epochs = 0;    ///< optimizer.warmup_epochs (fractions allowed)
  /// The rest of the optimizer's schedule (schedule, step_epochs, gamma,
  /// min_lr; its lr and warmup_epochs are the fields above) and the run's
  /// epochs, which a cosine schedule spans (model::lr_at).
  optimizer_spec optimizer;
  int64_t epochs = 0;
};

/// The lr of global step `step` (0-based, counted over all epochs):
/// model::lr_at with the scaled target as its peak. A pure function: every
/// worker and shard computes the same value. Throws
/// model::error on a non-positive lr, batch or steps_per_epoch.
double scheduled_lr(const lr_schedule& schedule, int64_t step, int64_t steps_per_epoch);

// -- the frozen prefix ---------------------------------------------------------

/// frozen_features' block_rows for the frozen prefix `prefix` of a run:
/// `feature_block`, or 0 (the whole minibatch, as training computes it) when
/// a layer of the prefix normalises over the batch (batch_dependent_layers).
/// Such a prefix cannot be cached per sample: throws model::error naming the
/// layer when `cache`. What the reference and the worker actors both use.
int64_t prefix_block_rows(const layered_model& prefix, bool cache, int64_t feature_block);

// -- the local reference -------------------------------------------------------

/// How the workers' gradients are summed (see the conventions above).
enum class summation { ring, worker_order };

/// The mean of W >= 2 workers' values of elements [first, first + n) of a
/// bucket of `bucket_numel` elements, into `out` (float32, contiguous, n
/// elements): each element summed in the order `order` gives it (ring:
/// ring_allreduce's, from its chunk's worker on; worker_order:
/// worker_order_sum's), then divided as mean_of_sum divides, in one pass
/// with no copy of the inputs and the same bits. inputs[w]: worker w's n
/// values (float32; undefined: zeros, as bucket_flat puts them).
void mean_of_workers(const std::vector<at::Tensor>& inputs, int64_t bucket_numel, int64_t first,
                     summation order, at::Tensor& out);

/// A data-parallel run.
struct data_parallel_settings {
  int32_t workers = 2;
  int64_t batch_size = 32;   ///< samples per worker per step
  int32_t epochs = 1;
  uint64_t seed = 42;        ///< data order seed (epoch_order)
  remainder_policy remainder = remainder_policy::pad;
  optimizer_spec optimizer;  ///< lr is the base lr of the schedule
  bool linear_scaling = false;
  int64_t base_batch = 256;
  double warmup_epochs = 0;
  summation sum = summation::ring;
  double bucket_mb = 25;
  /// 0: synchronous (gradients exchanged every step). L >= 1: local SGD,
  /// each worker steps its own copy (own momentum) and the trainable weights
  /// are averaged (bucketed, in `sum` order, divided by W) after every L
  /// steps and at the end of every epoch.
  int32_t sync_every = 0;
  /// The last frozen layer ("" for none): layers [0, index] run forward in
  /// evaluation mode under NoGradGuard, get no gradient, never change.
  std::string freeze_up_to;
  /// Adaptive freezing (AutoFreeze) instead of a fixed prefix when
  /// freeze_groups is not empty; ignored with sync_every > 0.
  std::vector<std::string> freeze_groups; ///< last layer of each freezable group, in order
  adaptive_freeze_options adaptive;
  bool cache = false;        ///< feature cache of the frozen prefix's output, per worker
  double cache_mb = 256;     ///< per worker
  /// Rows of the frozen prefix's canonical blocks (frozen_features'
  /// block_rows), with or without the cache, so that the cache equals
  /// recomputation bit for bit. 0 runs the prefix over the whole minibatch
  /// (only without the cache).
  int64_t feature_block = default_feature_block;
  int64_t eval_batch = 256;
  /// Stop after the first epoch whose test accuracy reaches this (0: train
  /// every epoch), as the actors' runs stop at the workload's target_accuracy.
  double target_accuracy = 0;
  /// Stop at the first step after this many seconds of training (0: no
  /// limit), as the actors' runs stop at runtime.stop_after_seconds; the
  /// epoch cut short is not evaluated.
  double stop_after_seconds = 0;
  /// The warm-up's samples (all workers'): `steady` starts when they are
  /// trained (0: not marked).
  int64_t warm_up_samples = 0;
  /// Workers computed at once (worker_lanes.hpp), each on
  /// `threads_per_worker` torch threads: 1 computes them one after another
  /// on the caller's threads. Their sums do not depend on it, only on each
  /// worker's thread count.
  int32_t concurrent_workers = 1;
  int32_t threads_per_worker = 1;
  /// Keep the best epoch's weights by validation accuracy, stop after
  /// `patience` epochs without a better one (the workload's `save`,
  /// `early_stopping`), as the actors' runs do.
  selection_spec selection;
};

/// What a run produced.
struct data_parallel_result {
  std::vector<double> train_loss;    ///< per epoch, mean over all workers' samples
  std::vector<double> test_accuracy; ///< per epoch, worker 0's model
  /// Per epoch, worker 0's model on the validation samples (empty without them).
  std::vector<double> validation_accuracy;
  /// The epoch of the highest validation accuracy (-1 without validation)
  /// and, with selection.keep_best, its weights (layered_model::state()).
  int32_t best_epoch = -1;
  std::vector<at::Tensor> best_weights;
  /// Per epoch: seconds from the start of training until its evaluation ended.
  std::vector<double> epoch_seconds;
  /// The training from spec.warm_up_samples to the end of that epoch
  /// (unset: never reached, or not asked).
  std::optional<steady_span> steady;
  int64_t steps = 0;                 ///< global steps taken
  int64_t samples = 0;               ///< samples trained (all workers)
  std::string weights_digest;        ///< weights_digest of the final model
  layered_model model;               ///< the final model (worker 0's replica)
  std::vector<freeze_decision> decisions; ///< adaptive freezing decisions
  size_t frozen_layers = 0;          ///< the final freeze point
  cache_stats cache;                 ///< summed over workers
};

/// Builds a fresh model; every call must give the same initial weights
/// (make_model(spec) does).
using model_factory = std::function<layered_model()>;

/// The whole data-parallel run in one process, no actors: W model replicas
/// (each keeps its own batch norm buffers; the result and evaluation use
/// worker 0's), W minibatches per step, each worker's gradient computed on
/// its own, summed as `spec.sum` says, divided by W, one SGD step with the
/// scheduled lr, the new weights copied to every replica. Throws
/// model::error on a bad spec (unknown layer, cache over a prefix whose
/// output depends on the batch). Trains on data.train (augmented as it
/// says), evaluates on data.test and, when it has samples, data.validation.
data_parallel_result run_data_parallel_local(const model_factory& make, const data_splits& data,
                                             const data_parallel_settings& spec);
/// The same without validation samples.
data_parallel_result run_data_parallel_local(const model_factory& make, const dataset& train,
                                             const dataset& test,
                                             const data_parallel_settings& spec);

/// Whether the reference's synchronous step takes two workers' mean in the
/// optimizer's own pass (plain SGD without Nesterov, clipping or adaptive
/// freezing) instead of writing the mean and then stepping.
bool steps_of_two_means(int32_t workers, const optimizer_spec& optimizer, bool adaptive);

/// Seconds of one steady step of run_data_parallel_local as `spec` runs
/// it: its workers' forwards and backwards on their lanes, their gradients'
/// mean, the optimizer step and what joins them (the minibatches' gather,
/// the loss, the lanes' hand-overs), timed over `steps` steps after `warm_up`
/// on random samples of `sample_shape` with labels in [0, classes): what the
/// cost model takes for `--mode local`, whose end of a step no layer's
/// profile has (a mean of W gradients read cold, after the backward).
/// spec's epochs, data and stopping are the timing's own. When the timed
/// steps took less than `min_seconds`, as many more are timed again as fill
/// it (their samples at most max_timed_reference_bytes): one spell of a
/// shared host is a large share of 15 steps of a few ms. Throws model::error
/// unless steps, warm_up and classes are >= 1, and as run_data_parallel_local.
double time_reference_steps(const model_factory& make, data_parallel_settings spec,
                            const std::vector<int64_t>& sample_shape, int64_t classes,
                            int32_t steps = 15, int32_t warm_up = 5, double min_seconds = 0);

/// The least time the cost model's timings of a step span (their
/// min_seconds): 15 steps of a few ms are one spell of a shared host
/// (compare-mlp's `local` on 3 workers, 0.1 s of them, was timed at 6.5 ms
/// in one check and 7.4 in the next, its runs at 6.1-6.4).
inline constexpr double timed_loop_seconds = 0.3;

/// The most bytes of random samples time_reference_steps makes to fill its
/// `min_seconds`.
inline constexpr int64_t max_timed_reference_bytes = int64_t{64} << 20;

/// One model's training step timed whole: time_reference_steps of one worker
/// (spec.workers = 1, no exchange) on one torch thread, while `copies` - 1
/// more copies time the same beside it, each on a thread of its own (W
/// workers or stages on emulated hosts sharing this machine's cores); the
/// first copy's figure. The caller's torch thread count is as it was (the
/// process holds one figure of it, which each copy's thread sets). What the
/// cost model scales a layers' profile to. Throws model::error unless
/// copies >= 1, and as time_reference_steps.
double time_whole_step(const model_factory& make, data_parallel_settings spec,
                       const std::vector<int64_t>& sample_shape, int64_t classes,
                       int32_t copies = 1, double min_seconds = 0);

} // namespace baton::model
