#pragma once

// A subnet scheme: how job: ist cuts the full network into the subnets its
// workers train in a round and the slices its shards own, and how it glues
// them back. The round actors (ist_worker.hpp, ist_shard.hpp), the settings
// (ist_specs.hpp), the plan and the local reference run either scheme:
//
//   ist.kind  scheme         network    a round's subnet of worker w
//   ist       neuron_scheme  mlp        its part of every hidden layer's neurons
//   resist    block_scheme   resnet18   the shared layers and the residual
//                                       blocks dealt to it
//
// A scheme S is a struct of types and static functions, nothing else:
//
//   S::kind, S::title, S::subnet   "ist" / "IST" / "subnet": the roles are
//                                  <kind>_worker and <kind>_shard
//   S::shape                       the network as the settings carry it
//   S::worker_model, S::shard_model  what a worker, a shard holds
//
//   settings  shape_of(topology, task); check_shape(shape, W, S) (throws
//             std::runtime_error); encode_shape / decode_shape (YAML);
//             check_plan(topology, shape, S) (bad_config or none)
//   worker    make_worker(spec); check_samples(shape, data) ("" or why not);
//             train(model, spec, round, pieces from every shard, data,
//             minibatches) -> trained_round; evaluate(model, spec, every
//             shard's owned tensors, test data); worker_figure; digest
//   shard     make_shard(spec); put_owned(model, spec, tensors) (a restore);
//             begin_round(model, spec, round); round_tensors(model, spec,
//             round, w); take_trained(model, spec, w, tensors, from);
//             end_round(model, spec); owned(model) (copies or never written
//             in place); shard_figures
//   local     run_local(train, test, worker spec): the one-process reference
//
// Throwing functions throw model::error (or std::runtime_error for
// settings); the actors turn both into error values.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/ist_specs.hpp"
#include "messages/types.hpp"
#include "model/core/dataset.hpp"
#include "model/ist/ist.hpp"

namespace YAML {
class Node;
}

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// What a worker's round produced: the counts of its local steps and, by
/// shard, the trained tensors that go back to it.
struct trained_round {
  model::ist_local_result steps;
  std::vector<std::vector<at::Tensor>> to_shards;
};

/// Bytes of `tensors`.
inline int64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors)
    n += static_cast<int64_t>(t.nbytes());
  return n;
}

/// A reference run's settings (model::ist_spec, model::resist_spec) with
/// the fields every scheme's run has taken from worker 0's settings.
template <class Run, class WorkerSettings>
Run reference_run(const WorkerSettings& worker) {
  Run run;
  run.workers = worker.workers;
  run.local_steps = worker.local_steps;
  run.batch_size = worker.data.plan.batch_size;
  run.epochs = worker.data.plan.epochs;
  run.seed = worker.data.plan.seed;
  run.optimizer = worker.optimizer;
  run.eval_batch = worker.eval_batch;
  return run;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
