#pragma once

// job: data-parallel's strategy as the cost model sees it: the ring, the ps
// or local SGD with its frozen prefix on W workers, and `local`, the one
// process on every core (docs/cost-model.md).

#include <caf/expected.hpp>

#include "actors/modes/costing.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The cost model's inputs for the variant `q.name` of `q.t`: its worker
/// model profiled on one thread (`local`: on its lanes, with its loop timed
/// whole), its exchange as a cost::strategy. errc::bad_config for a frozen
/// prefix the profile lacks or bounded staleness (max_staleness > 0).
caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles);

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
