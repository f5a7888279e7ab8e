#pragma once

// IST's subnet scheme (ist.kind: ist; subnet_scheme.hpp): the hidden neurons
// of the mlp (model/ist/ist_network.hpp) are partitioned among the workers
// every round (model::make_ist_partition of seed and round, computed by
// every actor), and shard s owns 1/S of the neurons of every hidden layer
// (model::ist_shard_pieces).
//
// - a round: shard s sends worker w the pieces of w's subnet it owns; the
//   worker concatenates every tensor's pieces along its piece dim in shard
//   order (== model::slice_subnet), trains, and cuts the subnet back into
//   the same pieces; the shard writes each back in place as it comes.
// - owned slices are the pieces of the one-worker partition
//   (ist_whole_partition), whose single subnet is the whole network: what a
//   shard checkpoints, sends worker 0 for the evaluation and sends as the
//   final weights. Worker 0 holds a whole network for the evaluation only.

#include "actors/modes/ist/subnet_scheme.hpp"
#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// The mlp's hidden neurons partitioned among the workers every round.
struct neuron_scheme {
  static constexpr const char* kind = "ist";
  static constexpr const char* title = "IST";
  static constexpr const char* subnet = "subnet";
  using shape = model::ist_shape;
  using worker_settings = worker_spec<neuron_scheme>;
  using shard_settings = shard_spec<neuron_scheme>;

  // -- settings ----------------------------------------------------------------------

  /// The network of a topology: its samples' values, the section's hidden
  /// widths, the task's classes.
  static shape shape_of(const topology& t, const model::task& task);
  /// Throws std::runtime_error unless inputs and classes are positive and
  /// 1 to model::ist_max_hidden_layers widths are max(W, S) to
  /// model::ist_max_width each (every worker and shard gets a neuron).
  static void check_shape(const shape& x, int32_t workers, int32_t shards);
  /// The shape as YAML: inputs, hidden, classes.
  static YAML::Node encode_shape(const shape& x);
  /// encode_shape's YAML read back (unchecked).
  static shape decode_shape(const YAML::Node& n);
  /// bad_config (naming the file) when shard 0's owned slices, the largest
  /// message, exceed the 64 MiB a message may carry.
  static caf::error check_plan(const topology& t, const shape& x, int32_t shards);

  // -- a worker ----------------------------------------------------------------------

  /// What a worker holds: worker 0 the whole network it evaluates (others
  /// nothing: a subnet is assembled every round).
  struct worker_model {
    model::ist_network whole;
    model::ist_partition whole_partition;
  };

  /// A worker's model: worker 0's network from the run's seed.
  static worker_model make_worker(const worker_settings& spec);
  /// Why `data` does not fit (its samples are not `inputs` values wide), or "".
  static std::string check_samples(const shape& x, const model::dataset& data);
  /// Round `round`: the subnet assembled from every shard's pieces, trained
  /// on `minibatches`, cut back into every shard's pieces.
  static trained_round train(worker_model& m, const worker_settings& spec, int64_t round,
                             const std::vector<std::vector<at::Tensor>>& from_shards,
                             const model::dataset& data,
                             const std::vector<std::vector<int64_t>>& minibatches);
  /// Worker 0: the whole network from every shard's owned slices, evaluated
  /// on `test` as the reference evaluates it.
  static model::ist_evaluation evaluate(worker_model& m, const worker_settings& spec,
                                        const std::vector<std::vector<at::Tensor>>& owned,
                                        const model::dataset& test);
  /// "formula_bytes_per_round": model::ist_bytes_formula.
  static messages::named_figure worker_figure(const worker_model& m,
                                              const worker_settings& spec);
  /// Worker 0's whole network's digest.
  static std::string digest(const worker_model& m);

  // -- a shard -----------------------------------------------------------------------

  /// What a shard holds: a whole network from the run's seed of which it
  /// only reads and writes the slices it owns.
  struct shard_model {
    model::ist_network whole;
    model::ist_partition whole_partition;
    std::vector<model::ist_piece> owned;
    model::ist_partition partition; ///< this round's
  };

  /// A shard's model: the initial network and its owned pieces.
  static shard_model make_shard(const shard_settings& spec);
  /// Puts `slices` (as owned() returned them) in place; throws model::error
  /// on a count or shape that differs.
  static void put_owned(shard_model& m, const shard_settings& spec,
                        const std::vector<at::Tensor>& slices);
  /// Round `round`'s partition.
  static void begin_round(shard_model& m, const shard_settings& spec, int64_t round);
  /// The pieces of worker `worker`'s subnet of this round it owns.
  static std::vector<at::Tensor> round_tensors(shard_model& m, const shard_settings& spec,
                                               int32_t worker);
  /// Worker `worker`'s trained pieces, written back in place (throws
  /// model::error on a misfit).
  static void take_trained(shard_model& m, const shard_settings& spec, int32_t worker,
                           const std::vector<at::Tensor>& tensors, const std::string& from);
  /// Nothing: every piece went back in place as it came.
  static void end_round(shard_model& m, const shard_settings& spec);
  /// Its owned slices (copies: it writes its network in place later).
  static std::vector<at::Tensor> owned(const shard_model& m);
  /// "owned_parameters": the scalars it owns.
  static std::vector<messages::named_figure> shard_figures(const shard_model& m,
                                                           const shard_settings& spec);

  // -- the local reference -------------------------------------------------------------

  /// model::run_ist_local of worker 0's settings.
  static model::ist_result run_local(const model::dataset& train, const model::dataset& test,
                                     const worker_settings& worker);
};

// -- the pieces ------------------------------------------------------------------------

/// The network whose parameters() are `parameters` (fc1, bn1.w, bn1.b, fc2,
/// ..., the output layer). Throws model::error unless their count is 3k + 1.
model::ist_network ist_network_of(std::vector<at::Tensor> parameters);

/// The partition of one worker: every hidden neuron, in order. Its subnet
/// is the whole network, and its pieces for shard s are the slices shard s
/// owns.
model::ist_partition ist_whole_partition(const model::ist_shape& shape);

/// The values of `pieces` (ist_shard_pieces of `worker`) taken from `whole`.
std::vector<at::Tensor> ist_take_pieces(const model::ist_network& whole,
                                        const model::ist_partition& partition, int32_t worker,
                                        const std::vector<model::ist_piece>& pieces);

/// Writes `values` (as ist_take_pieces returned them) back into `whole`.
/// Throws model::error when their count or a shape differs.
void ist_put_pieces(model::ist_network& whole, const model::ist_partition& partition,
                    int32_t worker, const std::vector<model::ist_piece>& pieces,
                    const std::vector<at::Tensor>& values);

/// Worker `worker`'s subnet from the pieces of every shard (from_shards[s]:
/// shard s's tensors, in ist_shard_pieces order): each tensor concatenated
/// along its piece dim in shard order, equal to slice_subnet bit for bit.
/// Throws model::error on a missing piece or a wrong shape.
model::ist_network ist_assemble_subnet(const model::ist_shape& shape,
                                       const model::ist_partition& partition, int32_t worker,
                                       const std::vector<std::vector<at::Tensor>>& from_shards);

/// The pieces of `subnet` that go back to shard `shard` (contiguous copies).
std::vector<at::Tensor> ist_split_subnet(const model::ist_network& subnet,
                                         const model::ist_shape& shape,
                                         const model::ist_partition& partition, int32_t worker,
                                         int32_t shard, int32_t shards);

/// Scalars shard `shard` of `shards` owns (its owned slices together).
int64_t ist_owned_elements(const model::ist_shape& shape, int32_t shard, int32_t shards);

} // namespace ist
} // namespace modes
} // namespace baton::actors
