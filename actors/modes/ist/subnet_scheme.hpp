#pragma once

// A subnet scheme: how job: ist cuts the full network into the subnets its
// workers train in a round and the slices its shards own, and how it glues
// them back. Everything else of the job is one piece of code for either
// scheme: the round actors (worker.hpp, shard.hpp), the settings
// codec (role_settings_yaml.hpp), the plan and the local reference
// (job.hpp).
//
//   ist.kind  scheme         network    a round's subnet of worker w
//   ist       neuron_scheme  mlp        its part of every hidden layer's neurons
//   resist    block_scheme   resnet18   the shared layers and the residual
//                                       blocks dealt to it
//
// A scheme is subnet_scheme<Network>: Network gives its names and types
// (neuron_scheme.hpp, block_scheme.hpp), the scheme's .cpp defines the
// functions below marked "what a scheme defines" for it and instantiates
// the rest (template struct subnet_scheme<Network>), so that no other file
// needs to see a scheme's functions (a third scheme: one header for its
// Network, one .cpp, one line in ist::plan, run_local and the
// registry). Throwing functions throw model::error; the actors turn it into
// an error value.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/role_settings.hpp"
#include "actors/roles/role_type.hpp"
#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "messages/types.hpp"
#include "model/core/dataset.hpp"
#include "model/core/export.hpp"
#include "model/core/layered_model.hpp"
#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// What a scheme is called.
struct scheme_names {
  const char* kind;   ///< its ist.kind: "ist", "resist"; the roles <kind>_worker, <kind>_shard
  const char* title;  ///< in errors: "IST", "ResIST"
  const char* subnet; ///< what a worker's subnet is: "subnet", "sub-ResNet"
};

/// What a worker's round produced: the counts of its local steps and, by
/// shard, the trained tensors that go back to it.
struct trained_round {
  model::ist::local_result steps;
  std::vector<std::vector<at::Tensor>> to_shards;
};

/// The whole network as `--save-model` writes it (model/core/export.hpp):
/// its layers, computing what worker 0's evaluation computes, and what their
/// export needs besides them.
struct exported_network {
  model::layered_model model;
  model::export_options options;
};

/// The scheme over `Network`, a struct with `names` (scheme_names), `shape`
/// (the network as the settings carry it, with an inspect field list),
/// `worker_model` (what a worker holds between rounds), `shard_model` (what
/// a shard holds) and `reference_result` (what its local reference returns).
template <class Network>
struct subnet_scheme {
  static constexpr scheme_names names = Network::names;
  using shape = typename Network::shape;
  using worker_model = typename Network::worker_model;
  using shard_model = typename Network::shard_model;
  using worker_settings = ist::worker_settings<subnet_scheme>;
  using shard_settings = ist::shard_settings<subnet_scheme>;
  using pieces = std::vector<std::vector<at::Tensor>>; ///< by shard

  // -- what a scheme defines: settings ---------------------------------------------

  /// The network of a topology of job: ist training `task`.
  static shape shape_of(const topology& t, const model::task& task);
  /// What `x` must be to fit W workers and S shards when it does not
  /// ("hidden widths of at least 3"), "" when it fits (the settings' check).
  static std::string misfit(const shape& x, int32_t workers, int32_t shards);
  /// bad_config (naming the file) when the plan cannot carry the network
  /// (a message over the 64 MiB a message may carry), or none.
  static caf::error check_plan(const topology& t, const shape& x, int32_t shards);

  // -- what a scheme defines: a worker ---------------------------------------------

  /// A worker's model before its first round.
  static worker_model make_worker(const worker_settings& spec);
  /// Why the network does not take `data`'s samples, or "".
  static std::string check_samples(const shape& x, const model::dataset& data);
  /// Round `round` of epoch `epoch`: the subnet from every shard's pieces,
  /// trained on `minibatches` of `data` (augmented for the epoch), cut back
  /// into every shard's pieces.
  static trained_round train(worker_model& m, const worker_settings& spec, int64_t round,
                             int32_t epoch, const pieces& from_shards,
                             const model::dataset& data,
                             const std::vector<std::vector<int64_t>>& minibatches);
  /// Worker 0: the whole network from every shard's owned tensors,
  /// evaluated on `test` as the scheme's reference evaluates it.
  static model::ist::evaluation evaluate(worker_model& m, const worker_settings& spec,
                                         const pieces& owned, const model::dataset& test);
  /// A figure of the worker's report ("formula_bytes_per_round", "model_bytes").
  static messages::named_figure worker_figure(const worker_model& m,
                                              const worker_settings& spec);
  /// Worker 0's whole network's digest, as the reference's.
  static std::string digest(const worker_model& m);

  // -- what a scheme defines: a shard ----------------------------------------------

  /// A shard's model: the tensors it owns of the initial network.
  static shard_model make_shard(const shard_settings& spec);
  /// Puts `owned` (as owned() returned them: a checkpoint's) in place;
  /// throws model::error on a count, shape or type that differs.
  static void put_owned(shard_model& m, const shard_settings& spec,
                        const std::vector<at::Tensor>& owned);
  /// Round `round` begins: its subnets from the seed and the round.
  static void begin_round(shard_model& m, const shard_settings& spec, int64_t round);
  /// The pieces of worker `worker`'s subnet of this round it owns.
  static std::vector<at::Tensor> round_tensors(shard_model& m, const shard_settings& spec,
                                               int32_t worker);
  /// Worker `worker`'s trained pieces of this round (from the actor
  /// `from`); throws model::error on a misfit.
  static void take_trained(shard_model& m, const shard_settings& spec, int32_t worker,
                           const std::vector<at::Tensor>& tensors, const std::string& from);
  /// Every worker's trained pieces came: the round's merge.
  static void end_round(shard_model& m, const shard_settings& spec);
  /// Its owned tensors as they are now (not written in place later).
  static std::vector<at::Tensor> owned(const shard_model& m);
  /// Figures of the shard's report (what it owns).
  static std::vector<messages::named_figure> shard_figures(const shard_model& m,
                                                           const shard_settings& spec);

  // -- what a scheme defines: the export (--save-model) -----------------------------

  /// The whole network from every shard's owned tensors (owned[s]: shard
  /// s's final weights) as worker 0 evaluates it; throws model::error on a
  /// count or shape that differs.
  static exported_network whole_network(const worker_settings& spec, const pieces& owned);
  /// The reference's final network cut into every shard's owned tensors,
  /// as the shards of an actor run send them at the end.
  static pieces owned_pieces(const typename Network::reference_result& result,
                             const worker_settings& spec);

  // -- what a scheme defines: the local reference -----------------------------------

  /// The result of the scheme's one-process reference run.
  using reference_result = typename Network::reference_result;
  /// The reference run (model::ist::run_local, model::ist::run_resist_local) on
  /// worker 0's settings, keeping the best epoch and stopping as `selection` says.
  static reference_result run_reference(const model::data_splits& data,
                                        const worker_settings& worker,
                                        const model::selection_spec& selection);

  // -- what every scheme gets ------------------------------------------------------

  /// The `<kind>_worker` role of a node's role table: parses the settings,
  /// checks its dataset directory against the node's data_dirs, loads the
  /// data and spawns a detached worker; starts nothing on any error
  /// (worker.hpp).
  static caf::expected<caf::actor> spawn_worker_role(caf::actor_system& sys,
                                                     const spawn_args& args);
  /// The `<kind>_shard` role: parses the settings, checks its checkpoint
  /// directory and spawns a detached shard with its initial (or restored)
  /// tensors; starts nothing on any error (shard.hpp).
  static caf::expected<caf::actor> spawn_shard_role(caf::actor_system& sys,
                                                    const spawn_args& args);

  /// A worker's settings as YAML (role_settings_yaml.hpp).
  static std::string to_yaml(const worker_settings& x);
  /// A shard's settings as YAML.
  static std::string to_yaml(const shard_settings& x);
  /// to_yaml's text of a worker parsed strictly: errc::bad_config on anything else.
  static caf::expected<worker_settings> parse_worker_settings(const std::string& yaml);
  /// to_yaml's text of a shard parsed strictly: errc::bad_config on anything else.
  static caf::expected<shard_settings> parse_shard_settings(const std::string& yaml);

  /// Worker w's settings in a topology of job: ist training `task` (job.hpp).
  static worker_settings worker_settings_of(const topology& t, const model::task& task,
                                            int32_t worker);
  /// The plan: W workers, S shards, every worker wired to every shard
  /// (plan.hpp draws it); bad_config naming the file when the task is
  /// unknown or check_plan refuses.
  static caf::expected<job_plan> plan(const topology& t);
  /// `--mode local`: the reference run on worker 0's data, reported as the
  /// actors report (local.hpp).
  static caf::expected<job_result> run_local(const topology& t, const model::task& task);
};

/// Bytes of `tensors`.
inline int64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors)
    n += static_cast<int64_t>(t.nbytes());
  return n;
}

/// A reference run's settings (model::ist::settings, model::ist::resist_settings) with
/// the fields every scheme's run has taken from worker 0's settings, and
/// the workload's `selection`.
template <class Run, class WorkerSettings>
Run reference_run(const WorkerSettings& worker, const model::selection_spec& selection) {
  Run run;
  run.workers = worker.workers;
  run.local_steps = worker.local_steps;
  run.batch_size = worker.data.plan.batch_size;
  run.epochs = worker.data.plan.epochs;
  run.seed = worker.data.plan.seed;
  run.optimizer = worker.optimizer;
  run.eval_batch = worker.eval_batch;
  run.selection = selection;
  return run;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
