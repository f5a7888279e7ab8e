#pragma once

// A round of IST (ist.kind: ist) timed as its roles run it, for `baton
// predict` (ist/cost.cpp): no actors, no LibTorch header, so that its
// units need neither. Defined in neuron_scheme.cpp, with the pieces it
// times.

#include <cstdint>

#include "model/core/optimizer.hpp"
#include "model/cost/cost_model.hpp"
#include "model/ist_mlp/network.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

/// A round of `workers` workers and `shards` shards as the roles run it,
/// timed on this machine on random data of `batch` samples a step, for
/// `baton predict`: worker 0's pieces taken from every shard's whole
/// network, its subnet assembled, `local_steps` local steps, the subnet cut
/// and written back, `copies` such rounds at once on threads of their own
/// (W workers side by side on this machine's cores), each figure the
/// median over every copy's rounds after a warm-up one (each copy keeps
/// computing until all have timed theirs). Throws model::error.
struct round_timing {
  model::cost::ist_round_seconds round; ///< take and put: per worker and shard
  double step = 0;                      ///< one local step, a round's mean
};
round_timing time_round(const model::ist::shape& shape, int32_t workers, int32_t shards,
                        int32_t local_steps, int64_t batch,
                        const model::optimizer_spec& optimizer, int32_t copies);

} // namespace ist
} // namespace modes
} // namespace baton::actors
