#pragma once

// A data-parallel worker: the whole model, trained on its share of every
// epoch, its gradients all-reduced over the ring with its peers every step
// (synchronous, BSP).
//
// Data: a worker reads the dataset itself and trains its DistributedSampler
// share (model::worker_share: the seeded epoch order, padded to a multiple
// of W, every W-th sample from its index). No source deals to it: the
// source's replica rule deals a step's microbatches by position, which is
// not DistributedSampler's strided share, and a worker needs no credit
// window for data it has in memory. Worker 0 evaluates on the test split.
//
// One step, on every worker alike:
//
//   forward + backward of its minibatch (mean loss)
//     -> buckets (model::make_buckets) -> ring all-reduce (ring_exchange)
//     -> sum / W (model::mean_of_sum) -> sgd_step_in_place of every parameter
//
// With `overlap` (the default) a bucket goes on the ring from a gradient
// hook as soon as the backward has produced its last gradient, while the
// backward goes on (worker_replica::gradients with a bucket_ready); the
// ring keeps a round that arrives before its turn, so the sums are the same.
//
// so that every worker holds the same weights, equal bit for bit to
// model::run_data_parallel_local. The arithmetic is worker_replica's
// (worker_replica.hpp): a frozen prefix (freeze_up_to, or moved by
// AutoFreeze's decisions, which every worker takes alike after the same
// step from the same all-reduced gradients) runs forward only, through the
// feature cache, and its keys are in no bucket. With local SGD (sync_every
// L) a worker steps on its own gradient and the ring carries the trainable
// weights, averaged after every L steps and at every epoch end.
// After each epoch: worker 0 evaluates, and
// every worker sends its epoch report (the group "workers" merges them);
// at the end its trained count, its final report and (worker 0) its weights.
//
// Recovery (actors/roles/checkpointing.hpp): the job's step is the global
// optimizer step. When a worker is about to begin step s (every exchange of
// the steps before it over, an epoch's end included) it checkpoints, when s
// is a multiple of checkpoint_every, its weights and buffers, momentum,
// which keys stepped and its counters, and tells the coordinator of s. BSP:
// every worker's step s is a cut (the all-reduce or the shards' step s - 1
// is done). Local SGD: the same cut, since no message crosses workers
// between averages and an average that follows step s - 1 is over before
// step s begins. A restored worker starts at run.recovery.restore_step: its
// epoch (s / steps per epoch), the index in it, the lr schedule and local
// SGD's count follow from s; its cache starts empty (the same bits). A
// `throw` fault fires before it begins that step. The section refuses
// checkpoints and faults with max_staleness > 0 and adaptive freezing.

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/modes/data_parallel/worker_settings.hpp"
#include "actors/roles/role_type.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The model a worker trains (and the local reference): the mlp or IST's
/// network (ist_mlp) alone, or a backbone (convnet, resnet18) followed by its
/// classifier "fc2". Its
/// initial weights depend on `spec` only. Throws model::error.
model::layered_model make_worker_model(const model::model_spec& spec);

/// The model a worker starts from (and the local reference's replicas):
/// make_worker_model, with the backbone (every layer but the last,
/// the classifier) loaded from spec.checkpoint when one is given. Throws
/// model::error.
model::layered_model initial_model(const worker_settings& spec);

/// Loads the worker's data and model and spawns a detached worker `name`.
caf::expected<caf::actor> spawn_worker(caf::actor_system& sys,
                                       const std::string& name,
                                       const std::string& node,
                                       const worker_settings& spec);

/// The `data_parallel_worker` role of a node's role table: parses the
/// settings, checks its dataset directory against the node's data_dirs and
/// spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_worker_role(caf::actor_system& sys, const spawn_args& args);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
