#pragma once

// From a workload and a strategy (a topology parsed with the strategy's
// overrides, apps/compare/strategies.hpp) to the cost model's inputs
// (model/cost/cost_model.hpp): the profile of the model that strategy trains
// as cost::workload layers, and its settings (workers, exchange, shards,
// buckets, sync_every, freezing, pipeline stages and schedule, IST's
// workers and local steps) as a cost::strategy. docs/cost-model.md.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/ist/round_timing.hpp"
#include "model/cost/cost_model.hpp"
#include "model/planning/profiler.hpp"

namespace baton::apps {

namespace cost = baton::model::cost;

/// A strategy ready for the cost model.
struct costed_strategy {
  std::string name;        ///< as --strategies names it
  std::string model;       ///< the model it trains (profiled)
  std::string optimizer;   ///< the optimizer that steps it (the profile's step)
  cost::workload load;     ///< that model's profile and the batch it trains at
  /// The model's step timed whole (profile_cache::whole_step_of) that
  /// `load`'s layers were scaled to sum to (a data-parallel worker's, a
  /// pipeline's); 0: the layers as profiled.
  double timed_step_seconds = 0;
  cost::strategy strategy; ///< its settings
  int32_t hosts = 1;       ///< hosts its topology uses (workers; a pipeline's replicas)
  /// The settings as a projection to other host counts keeps them: workers
  /// and shards follow W where they equal the hosts run, a pipeline's
  /// stages are the fastest straight pipeline on W hosts.
  cost::strategy projected;
};

/// Profiles (model::profile_model, as `baton profile`) the model each
/// strategy trains, once per model, batch and torch threads: a comparison
/// profiles its mlp once per thread count, not per strategy. A `baton profile` file given
/// with --profile serves every strategy that trains its model.
class profile_cache {
public:
  explicit profile_cache(std::string profile_file = "") : file_(std::move(profile_file)) {}
  /// The profile of the model `t` trains at `batch` samples on `threads`
  /// torch threads, and the model's name; with `copies` > 1, taken while as
  /// many copies profile side by side (as the local loop's lanes compute,
  /// sharing the cores' caches and memory), the first copy's figures.
  caf::expected<model::model_profile> of(const actors::topology& t, int64_t batch,
                                         int32_t threads = 1, int32_t copies = 1);
  /// job: ist: a round of `workers` workers and `shards` shards at `batch`
  /// samples a step as its roles run it (the subnet assembled from its
  /// pieces, its local steps, the subnet cut, the shards' pieces taken and
  /// written back: actors::ist::time_round), `copies` as in of(). Always
  /// timed (a --profile file holds the whole network's layers).
  caf::expected<actors::ist::round_timing> round_of(const actors::topology& t, int64_t batch,
                                                    int32_t workers, int32_t shards,
                                                    int32_t copies = 1);
  /// job: data-parallel's `--mode local` step on `threads` torch threads,
  /// its loop timed whole on random samples of the workload's shape
  /// (actors::data_parallel::time_local_step: the lanes' forwards and
  /// backwards, the gradients' mean and the step as the loop runs them),
  /// once per model, batch, workers and threads, again in each
  /// profile_again (the median).
  caf::expected<double> local_step_of(const actors::topology& t, int32_t threads);
  /// The model `t` trains, one step at `batch` samples on one thread timed
  /// whole (model::time_whole_step: forward, loss, backward and step as the
  /// local loop runs them, unfrozen), while `copies` - 1 more copies time
  /// the same beside it; the median over the profile rounds as
  /// local_step_of's.
  caf::expected<double> whole_step_of(const actors::topology& t, int64_t batch, int32_t copies);
  /// Whether the layers' profiles are read from a --profile file (taken as
  /// they are: not scaled to a step timed here).
  bool from_file() const { return !file_.empty(); }
  /// The profiles made or read so far, by key.
  const std::map<std::string, model::model_profile>& all() const { return made_; }
  /// Profiles every model this cache profiled once more (and times every
  /// round again); each profile is then the median of all its profiles
  /// (model::median_of_profiles), each round figure its median. A
  /// comparison profiles in each of its rounds, after the round's runs, so
  /// that its predictions read the host in the windows its runs did: one
  /// profile of half a second is one spell of a shared host, and moved
  /// predictions by up to 40% between compares. Profiles read from the
  /// file are not taken again.
  void profile_again();
  /// How many profiles each one profiled here is the median of (1 before
  /// profile_again).
  int32_t rounds() const { return rounds_; }

private:
  std::string file_;
  std::map<std::string, model::model_profile> made_;
  std::map<std::string, std::function<model::model_profile()>> makers_; ///< by key
  std::map<std::string, std::vector<model::model_profile>> taken_;     ///< by key
  std::map<std::string, std::function<actors::ist::round_timing()>> round_makers_;
  std::map<std::string, std::vector<actors::ist::round_timing>> rounds_taken_;
  /// A loop's step timed by `time` under `key`, once, then again in each
  /// profile_again: the median of its timings.
  caf::expected<double> loop_step(const std::string& key,
                                  std::function<caf::expected<double>()> time);
  std::map<std::string, std::function<double()>> loop_step_makers_;   ///< by key
  std::map<std::string, std::vector<double>> loop_steps_taken_;       ///< by key
  int32_t rounds_ = 1;
};

/// The cost model's view of one strategy: `t` is the workload parsed with
/// the strategy's overrides; its model profiled with `side_by_side` copies
/// computing at once (its workers or stages on emulated hosts sharing this
/// machine's cores; 1: alone, as on hosts of their own). `local` takes its
/// own lanes instead. errc::bad_config for a job the model does not cover
/// (transfer, resist) or a setting it cannot read (naming it).
caf::expected<costed_strategy> cost_strategy_of(const std::string& name,
                                                const actors::topology& t,
                                                profile_cache& profiles,
                                                int32_t side_by_side = 1);

/// The workload of a profile: its layers, the batch it was taken at, the
/// batch trained (`batch_size`), samples per epoch and test samples.
cost::workload workload_of(const model::model_profile& p, const actors::topology& t);

} // namespace baton::apps
