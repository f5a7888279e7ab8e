#pragma once

// The parameter-server exchange of job: data-parallel (`exchange: ps`),
// both sides, free of actors: plain data, testable without an actor system
// against model::run_data_parallel_local with summation::worker_order.
//
// The flat key space (model::flat_layout) is cut into S contiguous shard
// ranges balanced by bytes (model::shard_ranges: a parameter may span two
// shards). Shard s exchanges only the trainable part of its range
// (model::trainable_part); a shard whose range is all frozen is idle: no
// worker pushes to it, it sends nothing (0 bytes for frozen keys).
//
//   worker w, step k                         shard s
//   gradient -> split (one copy) -- push --> shard_optimizer::push(w, k, g)
//                                            ... all W pushes of step k:
//                                            sum in worker order, / W,
//                                            sgd_step_out_of_place
//   ps_exchange::receive(s, k, x) <- pull -- the new slice, to every worker
//   all S slices of step k: apply (write into the parameters)
//
// Bounded staleness (`max_staleness: s`): a worker that has applied the
// shards' weights of steps 0 .. a-1 may compute the gradient of step k when
// a >= k - s (may_compute). s = 0 is BSP: step k is computed on the weights
// after step k - 1, exactly as the reference. With s > 0 the gradient of
// step k may be computed on weights up to s steps old (those after step
// k - 1 - s at worst), and since a shard steps k only once all W workers
// pushed k, no worker is more than s steps ahead of the slowest. The shards
// still sum all W pushes of a step before stepping it: staleness changes
// which weights a gradient was computed on, never which gradients a step
// sums.

#include <cstdint>
#include <map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/data_parallel/data_parallel.hpp"
#include "model/core/training.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// Whether a worker that has applied the shards' weights of steps
/// [0, applied) may compute the gradient of step `step` under bounded
/// staleness `max_staleness` (>= 0): applied >= step - max_staleness.
bool may_compute(int64_t step, int64_t applied, int32_t max_staleness);

/// Shard s's part of the flat key space: its range (shard_ranges) cut to the
/// trainable keys; empty for an idle shard. Throws model::error unless
/// 1 <= shards.
std::vector<model::key_range> shard_parts(const model::flat_layout& layout, int32_t shards);

/// Writes `values` (range.size() float32 elements, the flat vector's
/// elements `range`) into the per-key tensors `parameters` (named_parameters
/// order, shaped as `layout`'s keys, contiguous), across key boundaries.
void write_range(std::vector<at::Tensor>& parameters, const model::flat_layout& layout,
                 const model::key_range& range, const at::Tensor& values);

/// A worker's side: cuts its gradient into the shards' slices, and gathers
/// the slices the shards send back, step by step, into its parameters.
class ps_exchange {
public:
  /// For `layout` cut into `shards` ranges (throws model::error unless
  /// shards >= 1).
  ps_exchange(model::flat_layout layout, int32_t shards);

  /// S, idle shards included.
  int32_t shards() const { return static_cast<int32_t>(parts_.size()); }
  /// Shard s's part (what is pushed to and pulled from it).
  const model::key_range& part(int32_t shard) const;
  /// Whether shard s has no trainable key (no traffic).
  bool idle(int32_t shard) const { return part(shard).empty(); }

  /// The flat gradient (model::flatten: a parameter without a gradient
  /// counts as zeros) cut into one contiguous copy per shard, each copied
  /// once from the gradients (model::flatten_range: no flat vector of the
  /// whole in between); undefined for an idle shard. `gradients` in
  /// named_parameters order.
  std::vector<at::Tensor> split(const std::vector<at::Tensor>& gradients) const;

  /// Shard s's new slice of step `step`. Throws model::error (nothing
  /// recorded) for an unknown or idle shard, a step already applied, a
  /// second slice of the same shard and step, or a slice that is not
  /// part(s).size() float32 elements.
  void receive(int32_t shard, int64_t step, at::Tensor slice);
  /// Whether every busy shard's slice of step applied() arrived.
  bool complete() const;
  /// Writes step applied()'s slices into `parameters` (write_range) and
  /// moves on to the next step. Throws model::error unless complete().
  void apply(std::vector<at::Tensor>& parameters);
  /// Steps whose weights were applied: the next step awaited.
  int64_t applied() const { return applied_; }
  /// A restored worker's exchange: the weights of steps [0, step) are in
  /// its parameters already (its checkpoint), the next awaited is `step`.
  /// Throws model::error once a slice was received.
  void restart_at(int64_t step);

private:
  model::flat_layout layout_;
  std::vector<model::key_range> parts_;
  size_t busy_ = 0; ///< shards with a non-empty part
  std::map<int64_t, std::map<int32_t, at::Tensor>> arrived_; ///< step -> shard -> slice
  int64_t applied_ = 0;
};

/// A shard's side: its slice of the weights and of the momentum, the lr
/// schedule; sums the W pushes of each step in worker order and steps.
class shard_optimizer {
public:
  /// A shard over `part` (may be empty) whose initial weights are `initial`
  /// (part.size() float32 elements, copied), for `workers` workers, with
  /// the optimizer (its lr is the schedule's base) and lr schedule of the
  /// run. Throws model::error on a size mismatch or workers < 1.
  shard_optimizer(model::key_range part, const at::Tensor& initial, int32_t workers,
                  model::optimizer_spec optimizer, model::lr_schedule schedule,
                  int64_t steps_per_epoch);

  /// Worker w's gradient slice of step `step`. Throws model::error (nothing
  /// recorded) for an unknown worker, a step already taken, a second push of
  /// the same worker and step, or a slice that is not part.size() float32
  /// elements.
  void push(int32_t worker, int64_t step, at::Tensor gradient);
  /// Whether all W pushes of step steps() arrived.
  bool ready() const;
  /// Takes step steps(): the W pushes summed in worker order
  /// (model::worker_order_sum), divided by W, one optimizer_step_out_of_place of
  /// the slice with the scheduled lr. Returns the new weights, a fresh
  /// tensor the shard never writes again (safe to send). Throws
  /// model::error unless ready().
  at::Tensor step();
  /// Steps taken.
  int64_t steps() const { return steps_; }
  /// The current weights of the part.
  const at::Tensor& weights() const { return weights_; }
  /// The part this shard owns.
  const model::key_range& part() const { return part_; }
  /// The momentum (adam: first moment) of the part (zeros before the first step).
  const at::Tensor& momentum() const { return state_.first; }
  /// adam, adamw: the second moment of the part; undefined for sgd.
  const at::Tensor& second() const { return state_.second; }
  /// A restored shard: `steps` steps taken, with these weights, momentum and
  /// (adam, adamw) second moment (part().size() float32 elements each,
  /// copied). Throws model::error on a size mismatch or once a push was
  /// recorded.
  void restore(int64_t steps, const at::Tensor& weights, const at::Tensor& momentum,
               const at::Tensor& second = {});
  /// The ranges of the part (offsets into it) of keys their TorchScript
  /// file keeps out of training: a step leaves their weights as they are
  /// and their optimizer state zero, as the reference never steps them.
  void keep_fixed(std::vector<model::key_range> ranges) { fixed_ = std::move(ranges); }

private:
  model::key_range part_;
  at::Tensor weights_;
  model::parameter_state state_; ///< the part's optimizer state (steps: steps_)
  int32_t workers_;
  model::optimizer_spec optimizer_;
  model::lr_schedule schedule_;
  int64_t steps_per_epoch_;
  std::map<int64_t, std::vector<at::Tensor>> pushed_; ///< step -> per worker
  int64_t steps_ = 0;
  std::vector<model::key_range> fixed_; ///< keep_fixed's
};

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
