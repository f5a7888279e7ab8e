#pragma once

// job: pipeline's strategy as the cost model sees it: its schedule and its
// stages, the planner's for the hosts when the topology gives none
// (docs/cost-model.md).

#include <caf/expected.hpp>

#include "actors/modes/costing.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// The cost model's inputs for the variant `q.name` of `q.t`: its stages
/// settled for `q.hosts` nodes on `q.link_bandwidth` (settle_stages), a
/// microbatch of its model profiled on one thread, its schedule as a
/// cost::strategy. errc::bad_config for a schedule the model lacks.
caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles);

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
