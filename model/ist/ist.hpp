#pragma once

// The numerics of independent subnet training (issue 12, part A: fully
// connected networks), free of actors: the partition of every hidden layer's
// neurons in a round, a worker's subnet sliced out of the whole network and
// written back in place, which shard owns which slice, the bytes a round
// moves, L local SGD steps on a subnet, and `run_local`, the one-process
// reference the actor mode is checked against. The network is network
// (model/ist_mlp/network.hpp).
//
// Conventions the actors must follow to match the reference bit for bit:
// - seeds: one run seed. The network is make_network(shape, seed); the
//   partition of round r is make_partition(hidden, W, seed, r), computed
//   by every actor on its own (no partition messages); worker w's data is
//   worker_minibatches(n, seed, epoch, w, W, batch).
// - rounds are numbered from 0 over the whole run: epoch e (0-based) has
//   rounds_per_epoch rounds, round r of the run is epoch r / R's round
//   r % R, and it trains that epoch's steps [L (r % R), min(L (r % R + 1),
//   steps)) of every worker (the last round of an epoch may be shorter).
// - a part is cut from the layer's permutation (the first width % W parts
//   one neuron longer) and sorted ascending: a subnet's neurons are in
//   ascending order of their index in the whole network, and that is the
//   order of the rows and columns of its tensors (the order of the sums in
//   its matrix products).
// - every worker of a round slices from the network as it was at the start
//   of the round; the W write-backs touch disjoint elements, so their order
//   does not matter. Nothing is averaged; an element outside every worker's
//   subnet (outside every diagonal block of a hidden-to-hidden layer) keeps
//   its value.
// - local steps (local_steps): torch::optim::SGD's arithmetic per step
//   on the mean loss of one minibatch; the momentum buffer (when momentum !=
//   0) is reset at the start of every round, as a fresh optimizer would. The
//   default is the authors' plain SGD (momentum 0).
// - data, as the authors' code: every worker draws from the whole training
//   set in its own seeded order (not disjoint shards); an epoch is
//   floor(floor(n / batch) / W) steps per worker (the W workers together
//   train about n samples), full minibatches only (drop_last, as theirs).
// - shards (S of them, default S = W): shard s owns the contiguous neurons
//   shard_neurons(width, s, S) of every hidden layer, with, as the
//   authors' partitioned parameter server holds them: the first layer's rows
//   of its first-hidden-layer neurons, the batch norm parameters of its
//   neurons, and the outgoing weights of its neurons (the columns of the
//   next hidden-to-hidden layer, or of the output layer). shard_pieces
//   says which slice of a subnet each shard sends and takes back.
// - evaluation is on the whole network (evaluate, batch statistics of
//   each test batch of eval_batch samples in order).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/ist_mlp/network.hpp"
#include "model/core/training.hpp"
#include "model/ist/epoch_steps.hpp"

namespace baton::model::ist {

// -- partitions ------------------------------------------------------------------

/// A permutation of [0, width) that depends only on (seed, round, layer):
/// Fisher-Yates written out over an mt19937_64 seeded with
/// derive_seed(seed, "ist-partition/<round>/<layer>"), the same on every
/// machine.
std::vector<int64_t> permutation(int64_t width, uint64_t seed, int64_t round, size_t layer);

/// A contiguous range [begin, end) of neuron indices or of positions.
struct neuron_range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const neuron_range& o) const { return begin == o.begin && end == o.end; }
};

/// The `index`-th of `count` contiguous parts of [0, width): the first
/// width % count parts have one element more. Throws model::error unless
/// 1 <= count <= width and 0 <= index < count.
neuron_range cut(int64_t width, int32_t index, int32_t count);

/// The partition of one round: for every hidden layer, W disjoint parts
/// covering its neurons.
struct partition {
  int64_t round = 0;
  int32_t workers = 1;
  /// parts[layer][worker]: the worker's neurons of that hidden layer, sorted
  /// ascending: positions cut(width, worker, W) of permutation.
  std::vector<std::vector<std::vector<int64_t>>> parts;
  /// parts[layer][worker].
  const std::vector<int64_t>& neurons(size_t layer, int32_t worker) const;
};

/// The partition of round `round` for hidden widths `hidden`. Throws
/// model::error unless 1 <= workers <= every width.
partition make_partition(const std::vector<int64_t>& hidden, int32_t workers,
                         uint64_t seed, int64_t round);

// -- subnets ---------------------------------------------------------------------

/// Worker `worker`'s subnet, copied out of `whole`: the rows of the first
/// layer for its first-layer neurons, the diagonal block (its rows, its
/// columns) of every hidden-to-hidden layer, the columns of the output
/// layer for its last-layer neurons, its neurons' batch norm parameters.
network slice_subnet(const network& whole, const partition& partition,
                     int32_t worker);

/// Writes `subnet` (shaped as slice_subnet(whole, partition, worker)) back
/// into `whole` in place, at the elements it was sliced from; every other
/// element of `whole` is left as it was. Throws model::error on a shape
/// mismatch.
void write_back_subnet(network& whole, const network& subnet,
                       const partition& partition, int32_t worker);

// -- shards ----------------------------------------------------------------------

/// The neurons shard `shard` of `shards` owns in a hidden layer of `width`
/// neurons: cut(width, shard, shards).
neuron_range shard_neurons(int64_t width, int32_t shard, int32_t shards);

/// One slice of a subnet tensor that one shard sends to a worker (and takes
/// back after the local steps): positions [begin, end) along `dim` of the
/// subnet's tensor number `tensor` (in network::parameters() order),
/// all other dimensions whole. Those positions are the worker's neurons
/// partition.neurons(layer, worker)[begin, end) of hidden layer `layer`,
/// all inside shard_neurons(hidden[layer], shard, S).
struct piece {
  size_t tensor = 0;   ///< index into parameters(): fc1, bn1.w, bn1.b, fc2, ...
  int64_t dim = 0;     ///< 0: rows (fc1, batch norm), 1: columns (outgoing weights)
  size_t layer = 0;    ///< the hidden layer whose neurons `dim` runs over
  neuron_range positions;
  int64_t elements = 0; ///< scalars in the piece
};

/// Every piece shard `shard` of `shards` sends worker `worker` in the round
/// of `partition`, in parameters() order; for each tensor, the pieces of
/// shards 0, 1, ..., S-1 tile its `dim` in that order (possibly empty
/// pieces are listed too). Throws model::error unless 1 <= shards <= every
/// width and 0 <= shard < shards.
std::vector<piece> shard_pieces(const shape& shape, const partition& partition,
                                int32_t worker, int32_t shard, int32_t shards);

/// The values of `piece` for worker `worker`, taken from `whole` (or from
/// any network of the whole's shape that holds at least the shard's owned
/// slices: only those elements are read): shaped as the piece of the
/// worker's subnet tensor. Concatenating the pieces of shards 0..S-1 along
/// piece.dim gives slice_subnet's tensor.
at::Tensor take_piece(const network& whole, const partition& partition, int32_t worker,
                      const piece& piece);

/// Writes `values` (shaped as take_piece's result) back into `whole` where
/// take_piece read them; nothing else changes. Doing it for every piece of
/// every shard is write_back_subnet.
void put_piece(network& whole, const partition& partition, int32_t worker,
               const piece& piece, const at::Tensor& values);

// -- bytes -----------------------------------------------------------------------

/// Scalars in worker `worker`'s subnet of `partition`: what it receives at
/// the start of a round and sends back at its end (each way).
int64_t subnet_elements(const shape& shape, const partition& partition,
                        int32_t worker);

/// The formula the bench prints next to the count, in float32 bytes each
/// way per worker per round: the first and last layers' weights / W, every
/// hidden-to-hidden layer's / W^2, the batch norm parameters / W. Exact when
/// W divides every width.
double bytes_formula(const shape& shape, int32_t workers);

// -- data and local steps (the counts: epoch_steps.hpp) ------------------------------

/// Worker `worker`'s minibatches of epoch `epoch` (0-based): the first
/// steps x batch_size samples of epoch_order(n, derive_seed(seed,
/// "ist-data/<worker>"), epoch), cut into steps_per_epoch minibatches of
/// batch_size.
std::vector<std::vector<int64_t>> worker_minibatches(int64_t dataset_size, uint64_t seed,
                                                     int32_t epoch, int32_t worker,
                                                     int32_t workers, int64_t batch_size);

/// What some local steps did.
struct local_result {
  double loss_sum = 0;  ///< sum over steps of mean loss x minibatch size
  int64_t samples = 0;
  int64_t steps = 0;
};

/// By worker, its local steps' sample ids in one round.
using round_minibatches = std::vector<std::vector<std::vector<int64_t>>>;

/// One epoch of a one-process reference (run_local, run_resist_local):
/// every worker's minibatches of `epoch` (worker_minibatches of
/// `spec`'s seed, workers and batch size) cut into rounds of
/// spec.local_steps; `round(r, minibatches)` trains round r (the run's
/// round number) and returns its loss and sample sums over the workers.
/// Adds the epoch's rounds, steps per worker, samples and mean train loss
/// to `result`.
template <class Spec, class Result, class Round>
void run_reference_epoch(const dataset& train, const Spec& spec, int32_t epoch, Result& result,
                         Round round) {
  const int64_t steps = steps_per_epoch(train.size(), spec.batch_size, spec.workers);
  const int64_t rounds = rounds_per_epoch(steps, spec.local_steps);
  round_minibatches minibatches;
  for (int32_t w = 0; w < spec.workers; ++w)
    minibatches.push_back(worker_minibatches(train.size(), spec.seed, epoch, w, spec.workers,
                                                 spec.batch_size));
  local_result sum;
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t first = r * spec.local_steps;
    const int64_t last = std::min(steps, first + spec.local_steps);
    round_minibatches of_round;
    for (const auto& mine : minibatches)
      of_round.emplace_back(mine.begin() + first, mine.begin() + last);
    const local_result s = round(static_cast<int64_t>(epoch) * rounds + r, of_round);
    sum.loss_sum += s.loss_sum;
    sum.samples += s.samples;
    result.steps += last - first;
    ++result.rounds;
  }
  result.samples += sum.samples;
  result.train_loss.push_back(sum.loss_sum / static_cast<double>(sum.samples));
}

/// The mean loss of a minibatch's logits, of its images and labels.
using minibatch_loss =
    std::function<at::Tensor(const at::Tensor& images, const at::Tensor& labels)>;

/// One SGD step per entry of `minibatches` (sample ids of `train`, of
/// epoch `epoch`: augmented as gather_training says) on its `loss`, over `parameters` (which require gradients), with
/// torch::optim::SGD::step's arithmetic per parameter, in place (no
/// dampening, no Nesterov): weight decay, then the momentum buffer (created
/// as a clone of the round's first update), then parameter -= lr x update,
/// lr the schedule's at the run's step (at.first + k for the k-th minibatch;
/// optimizer.lr when at.per_epoch is 0). Shared by IST's and ResIST's local
/// steps (model/ist/resist.hpp).
local_result sgd_steps(const std::vector<at::Tensor>& parameters, const dataset& train,
                       const std::vector<std::vector<int64_t>>& minibatches, int32_t epoch,
                       const optimizer_spec& optimizer, const minibatch_loss& loss,
                       const round_steps& at = {});

/// Trains `subnet` in place for one round: one step per entry of
/// `minibatches` (sample ids of `train` in epoch `epoch`), each on its mean loss, with
/// torch::optim::SGD's arithmetic (weight decay, then momentum without
/// dampening whose buffer starts as the round's first gradient, then p -=
/// lr x update). The subnet's tensors need not require gradients; they do
/// not afterwards.
local_result local_steps(network& subnet, const dataset& train,
                         const std::vector<std::vector<int64_t>>& minibatches,
                         int32_t epoch, const optimizer_spec& optimizer,
                         const round_steps& at = {});

// -- the local reference -------------------------------------------------------

/// An IST run.
struct settings {
  ist::shape shape;            ///< shape.inputs must match the dataset's sample width
  int32_t workers = 2;         ///< W
  int32_t local_steps = 10;    ///< L
  int64_t batch_size = 128;    ///< per worker per step
  int32_t epochs = 1;
  uint64_t seed = 42;          ///< initialisation, partitions and data orders
  optimizer_spec optimizer{0.01, 0.0, 0.0}; ///< the authors' plain SGD, lr 0.01
  int64_t eval_batch = 256;
  selection_spec selection; ///< keep the best epoch, stop early (by validation accuracy)
};

/// What a run produced.
struct result {
  std::vector<double> train_loss;    ///< per epoch: mean over every worker's samples
  std::vector<double> test_loss;     ///< per epoch, whole network
  std::vector<double> test_accuracy; ///< per epoch, whole network
  /// Per epoch, whole network on the validation samples (empty without them).
  std::vector<double> validation_accuracy;
  int32_t best_epoch = -1;           ///< by validation accuracy (-1: none)
  ist::network best_network;         ///< with selection.keep_best: that epoch's network
  int64_t rounds = 0;
  int64_t steps = 0;                 ///< local steps per worker
  int64_t samples = 0;               ///< samples trained, all workers
  /// Elements each way per worker, summed over the run's rounds.
  std::vector<int64_t> exchanged_elements;
  std::string weights_digest;        ///< digest of the final network
  ist::network network;              ///< the final whole network
};

/// The whole IST run in one process, no actors: for every round, the
/// partition, the W subnets sliced from the network as it is, L local steps
/// on each (worker order 0, 1, ...: they are independent), the W subnets
/// written back; after every epoch, the whole network evaluated on
/// data.test and data.validation (when it has samples), the best epoch kept
/// and the run stopped as spec.selection says. Throws model::error on a bad
/// spec.
result run_local(const data_splits& data, const settings& spec);
/// The same without validation samples.
result run_local(const dataset& train, const dataset& test, const settings& spec);

} // namespace baton::model::ist
