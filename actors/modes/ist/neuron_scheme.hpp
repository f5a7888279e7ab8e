#pragma once

// IST's subnet scheme (ist.kind: ist; subnet_scheme.hpp): the hidden neurons
// of the mlp (model/ist_mlp/network.hpp) are partitioned among the workers
// every round (model::ist::make_partition of seed and round, computed by
// every actor), and shard s owns 1/S of the neurons of every hidden layer
// (model::ist::shard_pieces).
//
// - a round: shard s sends worker w the pieces of w's subnet it owns; the
//   worker concatenates every tensor's pieces along its piece dim in shard
//   order (== model::ist::slice_subnet), trains, and cuts the subnet back into
//   the same pieces; the shard writes each back in place as it comes.
// - owned slices are the pieces of the one-worker partition
//   (whole_partition), whose single subnet is the whole network: what a
//   shard checkpoints, sends worker 0 for the evaluation and sends as the
//   final weights. Worker 0 holds a whole network for the evaluation only.

#include <algorithm>
#include <string>
#include <vector>

#include "actors/modes/ist/subnet_scheme.hpp"
#include "model/ist/ist.hpp"

namespace baton::model::ist {

/// inputs and classes (positive), hidden (1 to max_hidden_layers widths
/// of 1 to max_width; neuron_scheme::misfit asks for at least one
/// neuron per worker and shard). In namespace baton::model::ist, where
/// the settings codec finds it (ADL).
template <class Inspector>
void inspect(Inspector& f, shape& x) {
  f.field("inputs", x.inputs).at_least(1);
  f.field("hidden", x.hidden).check(
    [](const std::vector<int64_t>& widths) {
      return !widths.empty() && widths.size() <= max_hidden_layers &&
             std::all_of(widths.begin(), widths.end(),
                         [](int64_t w) { return w >= 1 && w <= max_width; });
    },
    "1 to " + std::to_string(max_hidden_layers) + " widths of 1 to " +
      std::to_string(max_width));
  f.field("classes", x.classes).at_least(1);
}

} // namespace baton::model::ist

namespace baton::actors {
inline namespace modes {
namespace ist {

/// IST's network for subnet_scheme: the mlp's names and types.
struct mlp_neurons {
  static constexpr scheme_names names{"ist", "IST", "subnet"};
  using shape = model::ist::shape;
  using reference_result = model::ist::result;

  /// What a worker holds: worker 0 the whole network it evaluates (others
  /// nothing: a subnet is assembled every round).
  struct worker_model {
    model::ist::network whole;
    model::ist::partition whole_partition;
  };

  /// What a shard holds: a whole network from the run's seed of which it
  /// only reads and writes the slices it owns.
  struct shard_model {
    model::ist::network whole;
    model::ist::partition whole_partition;
    std::vector<model::ist::piece> owned;
    model::ist::partition partition; ///< this round's
  };
};

/// IST's scheme: the mlp's hidden neurons partitioned among the workers
/// every round (ist.kind: ist). Its functions: neuron_scheme.cpp.
using neuron_scheme = subnet_scheme<mlp_neurons>;

// -- the pieces ------------------------------------------------------------------------

/// The network whose parameters() are `parameters` (fc1, bn1.w, bn1.b, fc2,
/// ..., the output layer). Throws model::error unless their count is 3k + 1.
model::ist::network network_of(std::vector<at::Tensor> parameters);

/// The partition of one worker: every hidden neuron, in order. Its subnet
/// is the whole network, and its pieces for shard s are the slices shard s
/// owns.
model::ist::partition whole_partition(const model::ist::shape& shape);

/// The values of `pieces` (ist::shard_pieces of `worker`) taken from `whole`.
std::vector<at::Tensor> take_pieces(const model::ist::network& whole,
                                    const model::ist::partition& partition, int32_t worker,
                                    const std::vector<model::ist::piece>& pieces);

/// Writes `values` (as take_pieces returned them) back into `whole`.
/// Throws model::error when their count or a shape differs.
void put_pieces(model::ist::network& whole, const model::ist::partition& partition,
                int32_t worker, const std::vector<model::ist::piece>& pieces,
                const std::vector<at::Tensor>& values);

/// Worker `worker`'s subnet from the pieces of every shard (from_shards[s]:
/// shard s's tensors, in ist::shard_pieces order): each tensor concatenated
/// along its piece dim in shard order, equal to slice_subnet bit for bit.
/// Throws model::error on a missing piece or a wrong shape.
model::ist::network assemble_subnet(const model::ist::shape& shape,
                                    const model::ist::partition& partition, int32_t worker,
                                    const std::vector<std::vector<at::Tensor>>& from_shards);

/// The pieces of `subnet` that go back to shard `shard` (contiguous copies).
std::vector<at::Tensor> split_subnet(const model::ist::network& subnet,
                                     const model::ist::shape& shape,
                                     const model::ist::partition& partition, int32_t worker,
                                     int32_t shard, int32_t shards);

/// Scalars shard `shard` of `shards` owns (its owned slices together).
int64_t owned_elements(const model::ist::shape& shape, int32_t shard, int32_t shards);

} // namespace ist
} // namespace modes
} // namespace baton::actors
