#pragma once

// ResIST's subnet scheme (ist.kind: resist; subnet_scheme.hpp): resnet18's
// partitioned residual blocks are dealt to the workers every round
// (model::make_resist_deal of seed and round, computed by every actor); a
// worker holds the whole network and trains its sub-ResNet (the shared
// layers and its blocks); the shards own the network's state tensors
// (model::layered_model::state(): parameters, then buffers) and average
// what the workers send back (model::resist_average).
//
// - shard s owns the contiguous state tensors [bounds[s], bounds[s + 1]):
//   tensor k goes to the shard floor(offset_k x S / total) of its first byte,
//   so the ranges are balanced by bytes (a tensor is never split).
// - a round's messages carry, in ascending index order, the shard's tensors
//   of the layers worker w runs in that round (the shared layers and its
//   blocks): the shard sends them as the round's starting state, the worker
//   copies them in and sends them back trained. The first round a shard
//   sends after a (re)start carries its whole range (a restored worker's
//   network is the initial one). A shard's owned tensors are its range:
//   what it checkpoints, sends worker 0 for the evaluation and sends as the
//   final weights.

#include "actors/modes/ist/subnet_scheme.hpp"
#include "model/core/layered_model.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The network as block_scheme divides it.
struct resist_layout {
  size_t layers = 0;                ///< m.size()
  std::vector<size_t> partitioned;  ///< model::resist_partitioned_layers
  std::vector<size_t> state_layers; ///< model::resist_state_layers: each state tensor's layer
  /// S + 1 ascending state indices: shard s owns [bounds[s], bounds[s + 1]).
  std::vector<size_t> bounds;
};

/// The layout of `m` over `shards` shards (>= 1). Throws model::error when
/// m is not a resnet18 (no partitioned block).
resist_layout make_resist_layout(const model::layered_model& m, int32_t shards);

/// The state tensors (ascending indices) of shard `shard`'s range that
/// travel between it and worker `worker` in the round of `deal`: those of
/// the layers the worker runs, or all of the range when `whole`.
std::vector<size_t> resist_message_tensors(const resist_layout& layout,
                                           const model::resist_deal& deal, int32_t worker,
                                           int32_t shard, bool whole);

/// Checks that `values` fit the state tensors `indices` of `state` (count,
/// shape, dtype); throws model::error naming `what` and the first misfit.
void check_resist_tensors(const std::vector<at::Tensor>& values,
                          const std::vector<at::Tensor>& state,
                          const std::vector<size_t>& indices, const std::string& what);


/// ResIST's network as the settings carry it: resnet18 over `in_channels`
/// input channels with a classifier of `classes` outputs.
struct resnet_shape {
  int64_t in_channels = 1; ///< the samples' channels (1: Fashion-MNIST)
  int64_t classes = 10;
};

/// resnet18's partitioned residual blocks dealt to the workers every round.
struct block_scheme {
  static constexpr const char* kind = "resist";
  static constexpr const char* title = "ResIST";
  static constexpr const char* subnet = "sub-ResNet";
  using shape = resnet_shape;
  using worker_settings = worker_spec<block_scheme>;
  using shard_settings = shard_spec<block_scheme>;

  // -- settings ----------------------------------------------------------------------

  /// The network of a topology: the samples' channels (1 for Fashion-MNIST,
  /// the first of data.synthetic_shape for synthetic data), the task's classes.
  static shape shape_of(const topology& t, const model::task& task);
  /// Throws std::runtime_error unless 1 <= in_channels <= 64 and classes >= 1.
  static void check_shape(const shape& x, int32_t workers, int32_t shards);
  /// The shape as YAML: in_channels, classes.
  static YAML::Node encode_shape(const shape& x);
  /// encode_shape's YAML read back (unchecked).
  static shape decode_shape(const YAML::Node& n);
  /// None: resnet18's state (about 45 MB) fits in a message with one shard.
  static caf::error check_plan(const topology& t, const shape& x, int32_t shards);

  // -- a worker ----------------------------------------------------------------------

  /// What a worker holds: the whole network (the layers it runs are
  /// current) and how the shards divide it.
  struct worker_model {
    model::layered_model network;
    resist_layout layout;
  };

  /// A worker's model: the network from the run's seed.
  static worker_model make_worker(const worker_settings& spec);
  /// Why `data` does not fit (its samples are not in_channels x H x W), or "".
  static std::string check_samples(const shape& x, const model::dataset& data);
  /// Round `round`: every shard's state copied in, the sub-ResNet of the
  /// round's deal trained on `minibatches`, its tensors to every shard
  /// (views of the network: a shard only reads them before the next round).
  static trained_round train(worker_model& m, const worker_settings& spec, int64_t round,
                             const std::vector<std::vector<at::Tensor>>& from_shards,
                             const model::dataset& data,
                             const std::vector<std::vector<int64_t>>& minibatches);
  /// Worker 0: the merged network from every shard's range, evaluated with
  /// the partitioned blocks scaled (model::resist_evaluate).
  static model::ist_evaluation evaluate(worker_model& m, const worker_settings& spec,
                                        const std::vector<std::vector<at::Tensor>>& owned,
                                        const model::dataset& test);
  /// "model_bytes": the whole state's.
  static messages::named_figure worker_figure(const worker_model& m,
                                              const worker_settings& spec);
  /// The network's digest (model::weights_digest).
  static std::string digest(const worker_model& m);

  // -- a shard -----------------------------------------------------------------------

  /// What a shard holds: its range of the state, merged after every round.
  struct shard_model {
    resist_layout layout;
    std::vector<at::Tensor> state; ///< by state index: its range, the rest undefined
    model::resist_deal deal;       ///< this round's
    int64_t round = 0;
    std::vector<std::vector<at::Tensor>> trained; ///< by worker: this round's, as they come
  };

  /// A shard's model: its range of the initial network.
  static shard_model make_shard(const shard_settings& spec);
  /// Puts `tensors` (as owned() returned them) in its range; throws
  /// model::error on a count, shape or type that differs.
  static void put_owned(shard_model& m, const shard_settings& spec,
                        const std::vector<at::Tensor>& tensors);
  /// Round `round`'s deal.
  static void begin_round(shard_model& m, const shard_settings& spec, int64_t round);
  /// Its tensors of the layers worker `worker` runs this round (its whole
  /// range the first round after a (re)start).
  static std::vector<at::Tensor> round_tensors(shard_model& m, const shard_settings& spec,
                                               int32_t worker);
  /// Worker `worker`'s trained tensors, kept for the merge (throws
  /// model::error on a misfit, naming `from`).
  static void take_trained(shard_model& m, const shard_settings& spec, int32_t worker,
                           const std::vector<at::Tensor>& tensors, const std::string& from);
  /// Every tensor of its range becomes the average over the workers that
  /// ran its layer, in worker order.
  static void end_round(shard_model& m, const shard_settings& spec);
  /// Its range (never written in place: a merge makes new tensors).
  static std::vector<at::Tensor> owned(const shard_model& m);
  /// "owned_tensors" and "owned_bytes".
  static std::vector<messages::named_figure> shard_figures(const shard_model& m,
                                                           const shard_settings& spec);

  // -- the local reference -------------------------------------------------------------

  /// model::run_resist_local of worker 0's settings.
  static model::resist_result run_local(const model::dataset& train, const model::dataset& test,
                                        const worker_settings& worker);
};

} // namespace ist
} // namespace modes
} // namespace baton::actors
