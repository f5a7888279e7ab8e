#pragma once

// The numerics of ResIST (issue 12, part B: residual independent subnet
// training, Dun, Wolfe, Jermaine, Kyrillidis), free of actors: which
// residual blocks of resnet18 are partitioned, the deal of a round, the
// local steps of a worker on its sub-ResNet, the merge, the evaluation
// scaling, and `run_resist_local`, the one-process reference the actor mode
// is checked against.
//
// What the authors' released code (ResIST_release, cifar100_local_iteration_
// test.py, a PreActResNet-101) does, and what baton does with resnet18:
// - partitioned: the authors partition the blocks of the third section but
//   its first (layer3[1:], 22 blocks); that first block (stride 2, with a
//   downsample) and everything else (stem, layer1, layer2, layer4, fc) are
//   shared by every worker. resnet18's sections have two blocks each, so its
//   third section would give one block; baton partitions the non-strided
//   blocks (no downsample) of the two middle sections, layer2_1 and
//   layer3_1, and shares every other layer (conv1 bn1 layer1_* layer2_0
//   layer3_0 layer4_* fc2 and the parameter-free layers).
// - the deal of round r: blocks 0..B-1 (in layer order) are laid out as
//   permutations from (seed, r), one after the other, over max(B, W) slots;
//   slot i goes to worker i % W (round-robin). Every block gets at least one
//   worker; with B >= W each block exactly one and a worker ceil or floor of
//   B / W; with B < W every worker one block and a block several workers
//   (the authors' min_blocks_per_site = 1).
// - a worker trains its sub-ResNet: the shared layers and its blocks; a
//   block it does not hold is the identity (skipped, as the authors'
//   active_flag = False). `local_steps` steps of plain SGD (optimizer_spec;
//   the momentum buffer is reset every round, as the authors create a fresh
//   optimizer at each repartition), on the mean cross entropy of its own
//   minibatch, in training mode (batch norm updates its running statistics).
// - data, as job: ist: every worker draws from the whole training set in its
//   own seeded order (worker_minibatches), floor(floor(n / batch) / W)
//   steps per worker per epoch, rounds of L steps (the last may be shorter).
// - the merge after the round: every tensor of the state (parameters and
//   batch norm buffers) of a shared layer is averaged over all W workers, of
//   a partitioned block over the workers that held it: resist_average, in
//   ascending worker order. Every worker starts the next round from the
//   merged state (the whole model).
// - evaluation: a partitioned block's residual branch is multiplied by the
//   probability that a worker holds it, 1 / min(B, W) (the authors'
//   scale_constant = max(1 / W, min_blocks_per_site / blocks)), in
//   evaluation mode (running statistics); training uses 1.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/ist/ist.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/training.hpp"

namespace baton::model::ist {

// -- the network and its blocks -------------------------------------------------

/// ResIST's network: resnet18 over `in_channels` input channels (1 for
/// Fashion-MNIST, 3 for torchvision's stem) followed by the classifier
/// "fc2" (512 -> classes), as make_pretrain_model builds it from `seed`.
layered_model make_resist_network(int64_t in_channels, int64_t classes, uint64_t seed);

/// The indices (into m.layers()) of the partitioned blocks, ascending: the
/// layers named layer2_<k> and layer3_<k> with k >= 1. Throws model::error
/// when there are none (not a resnet18).
std::vector<size_t> resist_partitioned_layers(const layered_model& m);

// -- the deal of a round --------------------------------------------------------

/// Which worker holds which partitioned block in one round.
struct resist_deal {
  int64_t round = 0;
  int32_t workers = 1;
  size_t blocks = 0;
  /// held[worker]: the block numbers (0..blocks-1, positions in
  /// resist_partitioned_layers) the worker holds, ascending, no repeats.
  std::vector<std::vector<size_t>> held;
  /// The workers holding `block`, ascending (never empty).
  std::vector<int32_t> holders(size_t block) const;
  /// Whether `worker` holds `block`.
  bool holds(int32_t worker, size_t block) const;
};

/// The deal of round `round` of `blocks` blocks over `workers` workers (see
/// the conventions above). A pure function of its arguments. Throws
/// model::error unless blocks >= 1 and workers >= 1.
resist_deal make_resist_deal(size_t blocks, int32_t workers, uint64_t seed, int64_t round);

/// The evaluation factor on a partitioned block's residual branch:
/// 1 / min(blocks, workers) (1 with one worker: the plain network).
double resist_eval_scale(size_t blocks, int32_t workers);

/// For every layer of a model with `layers` layers: whether worker `worker`
/// runs it in the round of `deal` (false only for a partitioned block it
/// does not hold).
std::vector<bool> resist_active_layers(size_t layers, const std::vector<size_t>& partitioned,
                                       const resist_deal& deal, int32_t worker);

/// For every tensor of m.named_state() (parameters, then buffers): the
/// index of its layer in m.layers(). What a merge needs to know which
/// workers send a tensor.
std::vector<size_t> resist_state_layers(const layered_model& m);

// -- local steps and the merge -----------------------------------------------------

/// Runs the layers of `m` marked in `active` in order (the others are the
/// identity).
at::Tensor resist_forward(const layered_model& m, const std::vector<bool>& active,
                          const at::Tensor& x);

/// Trains the active layers of `m` in place (training mode): one step per
/// entry of `minibatches` (sample ids of `train`) on its mean cross entropy,
/// with sgd_steps (momentum buffers fresh). Inactive layers are untouched.
local_result resist_local_steps(layered_model& m, const std::vector<bool>& active,
                                const dataset& train,
                                const std::vector<std::vector<int64_t>>& minibatches,
                                int32_t epoch, const optimizer_spec& optimizer,
                                const round_steps& at = {});

/// The average of `values` (one per holder, in ascending worker order, all
/// of one shape and type): their sum from the first in that order, divided
/// by their count (floor division for an integer tensor such as batch norm's
/// num_batches_tracked). One value is returned unchanged (a copy). Throws
/// model::error when `values` is empty.
at::Tensor resist_average(const std::vector<at::Tensor>& values);

/// The merge of a round: for every state tensor of `merged` (same
/// architecture as the replicas), resist_average of that tensor over the
/// replicas of the workers running its layer (all W for a shared layer, the
/// holders for a partitioned block), copied into `merged`.
void resist_merge(layered_model& merged, const std::vector<layered_model>& replicas,
                  const std::vector<size_t>& partitioned, const resist_deal& deal);

/// Copies every state tensor of `from` into `to` (same architecture).
void copy_state(layered_model& to, const layered_model& from);

// -- evaluation ------------------------------------------------------------------

/// Test loss and accuracy of the whole network.
struct resist_evaluation {
  double loss = 0;     ///< mean cross entropy per sample
  double accuracy = 0; ///< fraction correct
};

/// Evaluates `m` on `data` (plan_eval batches of `batch_size`) in evaluation
/// mode with every partitioned block's residual branch scaled by `scale`;
/// leaves `m` in training mode with scale 1.
resist_evaluation resist_evaluate(const layered_model& m, const std::vector<size_t>& partitioned,
                                  double scale, const dataset& data, int64_t batch_size);

// -- the local reference -------------------------------------------------------

/// A ResIST run.
struct resist_settings {
  int64_t in_channels = 3;     ///< the samples' channels
  int64_t classes = 10;
  int32_t workers = 2;         ///< W
  int32_t local_steps = 10;    ///< L
  int64_t batch_size = 32;     ///< per worker per step (at least 2: batch norm)
  int32_t epochs = 1;
  uint64_t seed = 42;          ///< initialisation, deals and data orders
  optimizer_spec optimizer{0.01, 0.0, 0.0}; ///< plain SGD, lr 0.01
  int64_t eval_batch = 256;
  selection_spec selection; ///< keep the best epoch, stop early (by validation accuracy)
};

/// What a run produced.
struct resist_result {
  std::vector<double> train_loss;    ///< per epoch, mean over every worker's samples
  std::vector<double> test_loss;     ///< per epoch, whole network, scaled blocks
  std::vector<double> test_accuracy; ///< per epoch
  /// Per epoch, on the validation samples (empty without them).
  std::vector<double> validation_accuracy;
  int32_t best_epoch = -1;           ///< by validation accuracy (-1: none)
  layered_model best_network;        ///< with selection.keep_best: that epoch's merged network
  int64_t rounds = 0;
  int64_t steps = 0;                 ///< local steps per worker
  int64_t samples = 0;               ///< samples trained, all workers
  std::string weights_digest;        ///< weights_digest of the final merged network
  layered_model network;             ///< the final merged network
};

/// Checks a spec against its training set (model::error naming the field).
void check_resist_settings(const dataset& train, const resist_settings& spec);

/// The whole ResIST run in one process, no actors: W replicas; every round
/// each replica starts from the merged network, trains its sub-ResNet of the
/// round's deal for its minibatches of the round (workers in order 0, 1,
/// ...: they are independent), then the merge; after every epoch the merged
/// network is evaluated on `test`. With W = 1 this is plain SGD on the
/// whole network, bit for bit. Throws model::error on a bad spec.
resist_result run_resist_local(const dataset& train, const dataset& test,
                               const resist_settings& spec);
/// The same on data.train, evaluated on data.test and data.validation (when
/// it has samples), the best epoch kept and the run stopped as
/// spec.selection says.
resist_result run_resist_local(const data_splits& data, const resist_settings& spec);

} // namespace baton::model::ist
