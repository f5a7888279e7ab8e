#pragma once

// The `local` mode: the transfer job and backbone pre-training in one process,
// one plain loop, no actors. It is the reference the actor runtime is checked
// against (same data order, same microbatches, same arithmetic) and the
// baseline that `--baseline separate` runs once per head.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/core/dataset.hpp"
#include "model/transfer/feature_cache.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"

namespace baton::model {

/// Derives a per-actor seed from the run seed and a name (FNV-1a mix), so a
/// head's initial weights do not depend on how many other heads there are.
uint64_t derive_seed(uint64_t base, const std::string& name);

/// How the training data is cut: the same plan drives the actor source.
struct batch_plan {
  int64_t batch_size = 64;  ///< samples per minibatch (one optimiser step)
  int32_t microbatches = 1; ///< microbatches per minibatch
  int32_t epochs = 1;
  uint64_t seed = 42;       ///< data order seed
};

/// The microbatches of one training epoch: each entry is a list of sample
/// ids; minibatch k is entries [k*m, (k+1)*m). A last partial minibatch is
/// kept (cut into as many microbatches as it can fill, at least one).
struct epoch_plan {
  std::vector<std::vector<int64_t>> microbatches;
  std::vector<int32_t> step_of;      ///< minibatch index (within the epoch) per microbatch
  std::vector<int32_t> step_size_of; ///< microbatches in that minibatch
};
epoch_plan plan_epoch(int64_t dataset_size, const batch_plan& plan, int32_t epoch);

/// The test split in order, cut into batches of `batch_size`.
std::vector<std::vector<int64_t>> plan_eval(int64_t dataset_size, int64_t batch_size);

/// One head of a transfer job.
struct head_spec {
  std::string name;
  task task_def;
  model_spec model;  ///< name "head", classes = task classes, seed derived
  optimizer_spec optimizer;
};

/// Results of one head.
struct head_result {
  std::string name;
  std::string task;
  std::vector<double> train_loss;    ///< per epoch
  std::vector<double> test_accuracy; ///< per epoch
  int64_t samples = 0;               ///< training samples seen
  std::string weights_digest;
};

/// Progress callback: (head name, epoch, samples so far, recent mean loss).
using progress_fn = std::function<void(const std::string&, int32_t, int64_t, double)>;

/// Trains `heads` on the frozen `backbone` features in one loop: every
/// microbatch is forwarded through the backbone once and given to every head.
/// With one head this is exactly what one separate baseline process does.
std::vector<head_result> run_transfer_local(const layered_model& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress = {});

/// The same with the backbone's features computed (and cached) as
/// `backbone` says, as the transfer job's stage computes them; each epoch
/// (training, then evaluation) ends with backbone.end_epoch().
std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress = {});

/// Pre-training of a backbone + classifier on `t`: trains `epochs` epochs on
/// `train` and writes the whole model's checkpoint to `out_path`. Returns the
/// test accuracy on `test`.
struct pretrain_spec {
  model_spec backbone;
  task task_def;
  optimizer_spec optimizer;
  batch_plan plan;
  std::string out_path;
};
double pretrain(const pretrain_spec& spec, const dataset& train, const dataset& test,
                const progress_fn& progress = {});

/// The backbone + classifier used by pretrain (classifier layer named "fc2").
layered_model make_pretrain_model(const model_spec& backbone, int64_t classes);

} // namespace baton::model
