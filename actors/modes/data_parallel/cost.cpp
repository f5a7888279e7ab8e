#include "actors/modes/data_parallel/cost.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "actors/modes/data_parallel/local.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/runtime/plan_checks.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

namespace cost_model = model::cost;

/// The index after the layer `name` (a frozen prefix's length).
caf::expected<size_t> prefix_through(const std::string& strategy, const std::string& name,
                                     const std::vector<cost_model::layer_profile>& layers) {
  for (size_t k = 0; k < layers.size(); ++k)
    if (layers[k].name == name)
      return k + 1;
  return refuse_cost(strategy, "freeze.up_to '" + name + "' is no layer of the profiled model");
}

/// The ring, the ps or local SGD, with its frozen prefix. An adaptive
/// prefix changes as it trains: predicted unfrozen (its slowest case), and
/// said so in docs/cost-model.md.
caf::expected<cost_model::strategy> strategy_of(const std::string& name, const section_spec& s,
                                                const cost_model::workload& w) {
  cost_model::freezing freeze;
  if (s.freeze.policy == "fixed") {
    auto prefix = prefix_through(name, s.freeze.up_to, w.layers);
    if (!prefix)
      return prefix.error();
    freeze.frozen_layers = *prefix;
    freeze.cache = s.freeze.cache;
  }
  if (s.workers == 1)
    return cost_model::strategy{cost_model::local_strategy{freeze}};
  if (s.exchange == "ps") {
    if (s.max_staleness > 0)
      return refuse_cost(name, "bounded staleness (max_staleness > 0) is not modelled");
    return cost_model::strategy{cost_model::ps_strategy{freeze, s.shards}};
  }
  if (s.sync_every > 0)
    return cost_model::strategy{cost_model::local_sgd_strategy{freeze, s.sync_every, s.bucket_mb}};
  return cost_model::strategy{cost_model::ring_strategy{freeze, s.bucket_mb, s.overlap}};
}

/// run_local's loop on `threads` torch threads timed whole (time_local_step),
/// once per model, batch, workers and threads.
caf::expected<double> local_step(const topology& t, int32_t threads, cost_profiles& profiles) {
  const trained_model m = trained_model_of(t);
  const std::string key = "local/" + m.spec.name + "/b" + std::to_string(t.plan.batch_size) +
                          "/w" + std::to_string(section_of(t).workers) + "/t" +
                          std::to_string(threads) + "/" + m.optimizer.name;
  auto step = profiles.timed(key, [t, threads]() -> caf::expected<std::vector<double>> {
    auto seconds = time_local_step(t, threads);
    if (!seconds)
      return seconds.error();
    return std::vector<double>{*seconds};
  });
  if (!step)
    return step.error();
  return step->front();
}

} // namespace

caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles) {
  const topology& t = q.t;
  const section_spec& s = section_of(t);
  const int64_t batch = t.plan.batch_size;
  // Every worker computes on one thread (runtime.compute_threads on W
  // emulated hosts sharing this machine's cores). `local` is one process on
  // every core (compare runs it so): it computes min(W, cores) workers at
  // once, each on its share of the cores (its local loop's lanes).
  const bool local = q.name == "local";
  const int32_t cores = actors::cores();
  const int32_t lanes = local ? std::max(1, std::min(s.workers, cores)) : 1;
  auto profile = local ? profiles.of(t, batch, std::max(1, cores / lanes), lanes)
                       : profiles.of(t, batch, 1, q.side_by_side);
  if (!profile)
    return profile.error();
  costed_strategy c = costed_of(q.name, t, *profile);
  c.hosts = s.workers;
  auto strategy = strategy_of(q.name, s, c.load);
  if (!strategy)
    return strategy.error();
  if (!local) {
    if (auto err = scale_to_whole_step(c, t, batch, profiles, q.side_by_side))
      return err;
    return with_strategy(std::move(c), *strategy);
  }
  // `--mode local`: one process trains every worker's batch each step on
  // its lanes, then takes their mean and steps: the loop is timed whole,
  // its end read cold after the backward as no layer's profile has it
  // (compare-mlp's 2 workers on 2 lanes: the mean and step 0.13 ms timed
  // apart, 0.5 ms in the loop; the loop 4.6-5.5 ms a step where the
  // layers and that end summed to 4.0).
  const auto* workers = std::get_if<cost_model::ring_strategy>(&*strategy);
  cost_model::local_strategy one{workers ? workers->freeze : cost_model::freezing{}, c.hosts,
                                 lanes};
  auto step = local_step(t, cores, profiles);
  if (!step)
    return step.error();
  one.loop_step_seconds = *step;
  c.hosts = 1;
  return with_strategy(std::move(c), one);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
