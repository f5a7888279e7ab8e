#pragma once

// The cost model's view of a strategy (model/cost/cost_model.hpp), what
// `baton predict` and `baton compare --predict` read of a topology: the
// profile of the model it trains as cost::workload layers, and its settings
// (workers, exchange, shards, buckets, freezing, stages, schedule, local
// steps) as a cost::strategy. Each mode with a cost model makes its own in
// its folder (mode::cost: <m>/cost.cpp); the profiles and timings it asks
// for are taken by the caller's cost_profiles, once each. docs/cost-model.md.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "model/cost/cost_model.hpp"
#include "model/planning/profiler.hpp"

namespace baton::actors {
inline namespace modes {

/// The model `t`'s job trains and the optimizer that steps it: what its
/// workers or stages build (data-parallel's worker model, a pipeline's or
/// transfer's backbone with its classifier "fc2", IST's network, as the
/// job's parse settled them: topology::trained_network, trained_optimizer),
/// with the trained task's classes. What `baton profile`, predict and
/// compare time.
struct trained_model {
  model::model_spec spec;
  model::optimizer_spec optimizer;
};

trained_model trained_model_of(const topology& t);

/// A strategy ready for the cost model.
struct costed_strategy {
  std::string name;             ///< as --strategies names it
  std::string model;            ///< the model it trains (profiled)
  std::string optimizer;        ///< the optimizer that steps it (the profile's step)
  model::cost::workload load;   ///< that model's profile and the batch it trains at
  /// The model's step timed whole (cost_profiles::whole_step_of) that
  /// `load`'s layers were scaled to sum to (a data-parallel worker's, a
  /// pipeline's); 0: the layers as profiled.
  double timed_step_seconds = 0;
  model::cost::strategy strategy; ///< its settings
  int32_t hosts = 1;              ///< hosts its topology uses (workers; a pipeline's replicas)
  /// The settings as a projection to other host counts keeps them: workers
  /// and shards follow W where they equal the hosts run, a pipeline's
  /// stages are the fastest straight pipeline on W hosts.
  model::cost::strategy projected;
};

/// What a strategy's cost is asked of.
struct cost_request {
  std::string name; ///< the variant, as --strategies names it ("data-parallel:ring")
  topology t;       ///< the workload parsed with the variant's overrides
  int32_t hosts = 1; ///< the hosts its runs use: a pipeline's planner plans its stages for them
  double link_bandwidth = 0; ///< their link in bytes/s, for that planner; 0: not known
  /// Copies of its model profiled computing at once: its workers or stages
  /// on emulated hosts sharing this machine's cores; 1: alone, as on hosts
  /// of their own.
  int32_t side_by_side = 1;
};

/// The profiles and timings a mode's cost asks for, each taken once and, in
/// a comparison, again in each of its rounds (apps/predict's
/// profile_cache implements them).
class cost_profiles {
public:
  virtual ~cost_profiles() = default;
  /// The profile of the model `t` trains (trained_model_of) at `batch`
  /// samples on `threads` torch threads, with its name; with `copies` > 1,
  /// taken while as many copies profile side by side, the first copy's
  /// figures.
  virtual caf::expected<model::model_profile> of(const topology& t, int64_t batch,
                                                 int32_t threads, int32_t copies) = 0;
  /// That model's step at `batch` samples on one thread timed whole
  /// (model::time_whole_step: forward, loss, backward and step as the local
  /// loop runs them, unfrozen), while `copies` - 1 more copies time the same
  /// beside it; the median over the rounds.
  virtual caf::expected<double> whole_step_of(const topology& t, int64_t batch,
                                              int32_t copies) = 0;
  /// Figures timed by `time` under `key` (what else a mode's cost times as
  /// its roles run it: IST's round, data-parallel's local loop): timed once,
  /// then again in each round, each figure the median of its timings. An
  /// error of the first timing is returned; a later one keeps those before.
  virtual caf::expected<std::vector<double>> timed(
    const std::string& key, std::function<caf::expected<std::vector<double>>()> time) = 0;
  /// Whether the layers' profiles are read from a --profile file (taken as
  /// they are: not scaled to a step timed here).
  virtual bool from_file() const = 0;
};

/// errc::bad_config "baton predict: NAME: WHY".
caf::error refuse_cost(const std::string& name, const std::string& why);

/// The workload of a profile: its layers, the batch it was taken at, the
/// batch trained (`batch_size`), samples per epoch and test samples.
model::cost::workload workload_of(const model::model_profile& p, const topology& t);

/// The strategy `name` of `t` costed from `profile`, the profile of the
/// model `t` trains: its name, model, optimizer and load; its strategy is
/// the mode's to set (with_strategy).
costed_strategy costed_of(const std::string& name, const topology& t,
                          const model::model_profile& profile);

/// `c`'s layers scaled to sum to its model's step at `batch` timed whole
/// (cost_profiles::whole_step_of, `copies` side by side), their split kept,
/// where a worker or a stage computes in one graph a step; nothing where the
/// profiles are read from a file.
caf::error scale_to_whole_step(costed_strategy& c, const topology& t, int64_t batch,
                               cost_profiles& profiles, int32_t copies);

/// `c` with `s` as its strategy, and as its projection to other host counts
/// (shards that were one per host stay one per host; a pipeline's stages
/// are chosen again for W hosts).
costed_strategy with_strategy(costed_strategy c, model::cost::strategy s);

} // namespace modes
} // namespace baton::actors
