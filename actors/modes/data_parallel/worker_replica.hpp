#pragma once

// One data-parallel worker's model replica and the arithmetic of its steps,
// free of actors: the frozen prefix (fixed or moved by AutoFreeze) run
// forward only through the feature cache, the trainable rest's forward and
// backward, the SGD step, the gradient buckets of the trainable keys, local
// SGD's averaging. Every operation is the one model::run_data_parallel_local
// performs for that worker, in its order, so that a ring of actors holding
// these ends with the reference's weights bit for bit:
//
//   gradients(ids) -> bucket_vectors -> (ring: means) -> per_key -> step -> adapt
//   local SGD: gradients -> step ... every L steps: bucket_vectors(parameters)
//              -> (ring: means) -> per_key -> set_parameters
//
// The caller (the worker actor) moves the vectors around the ring.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "actors/modes/data_parallel/ring_exchange.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "messages/types.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/dataset.hpp"
#include "model/core/feature_cache.hpp"
#include "model/core/freezing.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/non_finite.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// Where a replica's steps spent their time (wall seconds, summed).
struct phase_seconds {
  double forward = 0;  ///< reading the minibatch, the frozen prefix (or the cache), the forward
  double backward = 0; ///< the backward and taking the gradients out
  double step = 0;     ///< the optimizer steps
};

/// A worker's replica, its optimizer state, its frozen prefix and cache.
class worker_replica {
public:
  /// Takes `m` (initial_model(spec)) and applies spec's fixed
  /// freeze point; makes the cache and the adaptive rule the spec asks for.
  /// Throws model::error on a layer the model lacks or a cached prefix whose
  /// output depends on the batch.
  worker_replica(model::layered_model m, const worker_settings& spec);

  // -- a step ---------------------------------------------------------------------

  /// Forward (the frozen prefix through model::frozen_features) and
  /// backward of minibatch `ids` of `data` in epoch `epoch` (augmented as
  /// model::gather_training does) with its mean cross-entropy loss,
  /// which it stores in `loss`. Returns the gradient per parameter
  /// (named_parameters() order; undefined for frozen ones) and leaves none in
  /// the model.
  std::vector<at::Tensor> gradients(const model::dataset& data, const std::vector<int64_t>& ids,
                                    int32_t epoch, double& loss);

  /// Called with a bucket's index and flat vector (bucket_vectors' entry).
  using bucket_ready = std::function<void(size_t, at::Tensor)>;

  /// gradients(), and each bucket's flat vector handed to `on_bucket` as
  /// soon as the backward has produced the bucket's last gradient (hooks on
  /// the parameters copy each gradient into its bucket as it arrives, so the
  /// vector is bucket_vectors' bit for bit), the rest (a
  /// bucket with a key that got no gradient) after the backward: each bucket
  /// exactly once, in the order the backward finishes them.
  std::vector<at::Tensor> gradients(const model::dataset& data, const std::vector<int64_t>& ids,
                                    int32_t epoch, double& loss, const bucket_ready& on_bucket);

  /// One optimizer step, in place (model::optimizer_step_in_place), of every
  /// parameter whose entry of `gradients` is defined, at learning rate `lr`,
  /// after clip_grad_norm over those entries when the optimizer clips; a
  /// key's first step starts its momentum buffer, as torch's SGD does.
  void step(const std::vector<at::Tensor>& gradients, double lr);

  /// Whether step_of_mean stands for step(per_key(means), lr): SGD, no
  /// clipping (its norm is over the means) and no adaptive freezing (it
  /// reads them).
  bool steps_of_mean() const;

  /// Two workers (ring_exchange::swaps): step(per_key(means), lr) with each
  /// bucket's mean (own + other) / 2 taken in the optimizer's own pass
  /// (model::sgd_step_of_mean_in_place), and into a key's own tensor first
  /// where that step does not fuse: the same weights bit for bit, without
  /// the pass that writes the means. `own` and `others` as
  /// ring_exchange::own and others give them once done.
  void step_of_mean(const std::vector<at::Tensor>& own,
                    const std::vector<std::vector<other_chunk>>& others, double lr);

  /// Two replicas that share their weights (share()): step_of_mean with the
  /// two workers' gradients as gradients() returns them (per parameter,
  /// undefined for frozen ones; no bucket), of every key only part `part`
  /// of `parts` (its elements [n part / parts, n (part + 1) / parts)): each
  /// of the two steps a half, every element as one replica steps it alone.
  /// Throws model::error where the step does not fuse (see steps_in_parts).
  void step_of_two(const std::vector<at::Tensor>& own, const std::vector<at::Tensor>& other,
                   double lr, int32_t part, int32_t parts);

  /// Whether two replicas may share their weights and step a half each
  /// (share(), step_of_two): steps_of_mean() with SGD's fused step (no
  /// Nesterov) over contiguous weights, whose every element is computed alone.
  bool steps_in_parts() const;

  /// What a step writes: every parameter, then its momentum buffer.
  std::vector<at::Tensor> stepped_tensors() const;

  /// This replica's parameters and momentum buffers become `tensors`, the
  /// stepped_tensors() of a replica of the same model with the same values
  /// (two workers of one process at the same step): from then on the two
  /// train one set of weights. Throws model::error on tensors of other
  /// shapes.
  void share(const std::vector<at::Tensor>& tensors);

  /// The flat vector of every bucket (model::bucket_flat) of per-key
  /// tensors: gradients, or parameters() for local SGD's average.
  std::vector<at::Tensor> bucket_vectors(const std::vector<at::Tensor>& per_key) const;

  /// Each bucket's size in float32 elements (ring_exchange::start).
  std::vector<int64_t> bucket_sizes() const;

  /// Per key, a view of its values in the buckets (the ring's means:
  /// model::mean_of_sum's bits); undefined for frozen keys.
  std::vector<at::Tensor> per_key(const std::vector<at::Tensor>& means) const;

  /// Local SGD: the trainable parameters take the values of `mean`.
  void set_parameters(const std::vector<at::Tensor>& mean);

  /// Adaptive freezing after global step `step` with its reduced gradients
  /// (per_key's result): adds them to the interval's sums and, when a decision
  /// is due, takes it, keeps it and moves the freeze point (layout, buckets
  /// and cache follow). Returns the decision taken, if any. Nothing without
  /// adaptive freezing.
  std::optional<model::freeze_decision> adapt(int64_t step,
                                              const std::vector<at::Tensor>& reduced);

  /// What a share of an evaluation found.
  struct score {
    int64_t correct = 0;
    int64_t evaluated = 0; ///< samples
  };
  /// Correct predictions of the whole model over `test` in batches of
  /// `eval_batch` (evaluation mode, then the freeze point's modes again),
  /// of the batches k with k % parts == part only: every part evaluates
  /// the same batches it would alone, so the parts' counts add up to the
  /// whole evaluation's (part 0 of 1).
  score share_correct(const model::dataset& test, int64_t eval_batch, int32_t part,
                      int32_t parts);

  // -- checkpoints (actors/roles/checkpointing.hpp) -------------------------------------

  /// Its weights and buffers (named_state: batch norm's statistics are this
  /// worker's own), momentum and which keys stepped, as version `steps`.
  /// Not the cache (a restored replica refills it: the same bits) nor
  /// adaptive freezing's state (the section refuses checkpoints with it).
  model::training_state save_state(int64_t steps) const;
  /// Puts save_state's tensors back; checks every name and shape first and
  /// changes nothing on a mismatch. Throws model::error.
  void restore(const model::training_state& s);

  // -- what it holds --------------------------------------------------------------

  const model::layered_model& model() const { return model_; }
  /// The leaves, named_parameters() order.
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  /// The leaves, for a parameter server's pulls to write their values into
  /// (the tensors, never the vector, change).
  std::vector<at::Tensor>& parameters() { return parameters_; }
  const model::flat_layout& layout() const { return layout_; }
  const std::vector<model::bucket>& buckets() const { return buckets_; }
  /// The freeze point: layers [0, point) frozen.
  size_t point() const { return point_; }
  /// Every adaptive decision taken, in order.
  const std::vector<model::freeze_decision>& decisions() const { return decisions_; }
  /// Whether it caches the frozen prefix's output.
  bool caches() const { return cache_ != nullptr; }
  /// The cache's counters (zeros without a cache).
  model::cache_stats cache_stats() const;
  /// The time gradients() and step() took so far.
  const phase_seconds& phases() const { return phases_; }

private:
  void set_point(size_t point);
  /// Whether key `key`'s parameter and momentum are contiguous (1-D views
  /// of their parts exist).
  bool flat(size_t key) const;

  model::layered_model model_;
  std::vector<at::Tensor> parameters_;
  std::vector<model::parameter_state> state_; ///< per key, its optimizer state
  model::optimizer_spec optimizer_; ///< lr: replaced by each step's
  double bucket_mb_;
  bool use_cache_;
  int64_t feature_block_;     ///< the spec's canonical block rows
  int64_t block_rows_ = 0;    ///< frozen_features' block_rows for this prefix
  size_t point_ = 0;
  model::flat_layout layout_;
  std::vector<model::bucket> buckets_;
  std::unique_ptr<model::feature_cache> cache_;
  std::optional<model::adaptive_freezer> freezer_;
  std::optional<model::interval_gradients> interval_;
  std::vector<model::freeze_decision> decisions_;
  phase_seconds phases_;
  model::non_finite_watch watch_{"a data-parallel worker"}; ///< names where a NaN loss came from
};

/// An adaptive freezing decision as one JSON object (an actor_report
/// event): {"event": "freeze", "step", "frozen_before", "frozen_after",
/// "layer", "rates", "threshold"}.
std::string freeze_decision_json(const model::freeze_decision& d);

/// Adds the replica's freeze point ("frozen_layers") and, with a cache, its
/// counts ("cache_hits", ...) to r.figures, and every adaptive decision to
/// r.events: what the metrics JSON shows of a worker's freezing.
void report_freezing(const worker_replica& replica, messages::actor_report& r);

/// Logs worker `name`'s adaptive decision: step, groups frozen, layer,
/// change rates and threshold.
void log_decision(const std::string& name, const model::freeze_decision& d);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
