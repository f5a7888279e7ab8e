#pragma once

// job: ist's strategy as the cost model sees it (kind ist, an mlp): W
// workers, S shards and L local steps, a subnet's step and a round's own
// work timed as the roles run them (docs/cost-model.md).

#include <caf/expected.hpp>

#include "actors/modes/costing.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// The cost model's inputs for the variant `q.name` of `q.t`: its network
/// profiled on one thread, a subnet's step and a round's own work timed as
/// its roles run them (time_round), its workers, shards and local steps as
/// a cost::strategy. errc::bad_config for kind resist.
caf::expected<costed_strategy> cost(const cost_request& q, cost_profiles& profiles);

} // namespace ist
} // namespace modes
} // namespace baton::actors
