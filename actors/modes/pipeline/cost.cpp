#include "actors/modes/pipeline/cost.hpp"

#include "actors/modes/backbone_split.hpp"
#include "actors/modes/pipeline/plan.hpp"
#include "actors/modes/pipeline/section.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

namespace {

namespace cost_model = model::cost;

/// Its schedule and its stages (settled: settle_stages), the hosts they use.
caf::expected<cost_model::strategy> strategy_of(const std::string& name, const topology& t,
                                                int32_t& hosts) {
  const auto& s = section_of(t);
  cost_model::pipeline_strategy p;
  p.microbatches = t.plan.microbatches;
  if (s.schedule == "gpipe")
    p.schedule = cost_model::pipeline_schedule::gpipe;
  else if (s.schedule == "1f1b-flush")
    p.schedule = cost_model::pipeline_schedule::one_f_one_b_flush;
  else if (s.schedule == "1f1b" || s.schedule == "1f1b-dynamic")
    p.schedule = cost_model::pipeline_schedule::one_f_one_b;
  else
    return refuse_cost(name, "pipeline schedule '" + s.schedule + "' is not modelled");
  if (s.stages_auto)
    return cost_model::strategy{p}; // the planner's: the fastest straight pipeline on the hosts
  hosts = 0;
  for (const auto& stage : s.stages) {
    p.stage_ends.push_back(stage.end);
    p.replicas.push_back(stage.replicas);
    p.weight_gradient_next.push_back(stage.weight_gradient_next);
    hosts += stage.replicas;
  }
  return cost_model::strategy{p};
}

} // namespace

caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles) {
  // The planner's stages, as a run over the hosts' nodes on the runs' link
  // settles them (none to settle when the topology gives its stages).
  topology t = with_local_nodes(q.t, q.hosts);
  t.link_bandwidth = q.link_bandwidth;
  if (auto settled = settle_stages(t); !settled)
    return settled.error();
  // Every stage computes a microbatch on one thread.
  const int64_t batch = microbatch_size_of(t);
  auto profile = profiles.of(t, batch, 1, q.side_by_side);
  if (!profile)
    return profile.error();
  costed_strategy c = costed_of(q.name, t, *profile);
  auto strategy = strategy_of(q.name, t, c.hosts);
  if (!strategy)
    return strategy.error();
  if (auto err = scale_to_whole_step(c, t, batch, profiles, q.side_by_side))
    return err;
  return with_strategy(std::move(c), *strategy);
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
