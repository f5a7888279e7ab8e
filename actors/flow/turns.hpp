#pragma once

// The rule of replicas that take turns (flow::dealing::turns), in one place:
// the fanout that deals by it and a receiver that puts the replicas' outputs
// back in order by it (transfer's merged_input) must agree. Plain data, no
// CAF.

#include <cstddef>
#include <cstdint>

namespace baton::actors {
inline namespace flow {

/// The replica, of `replicas` >= 1, that takes microbatch `id` in turns (an
/// id below 0, which no source makes, counts as 0).
inline size_t turn_of(int64_t id, size_t replicas) {
  return static_cast<size_t>(id < 0 ? 0 : id) % replicas;
}

} // namespace flow
} // namespace baton::actors
