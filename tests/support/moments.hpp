#pragma once

// The times the plain-data suites of the runtime's timers (liveness, the
// node watch, the fault injector) feed them instead of reading a clock: a
// test then says how much time passed, and its outcome cannot depend on
// how fast the machine runs it.

#include <chrono>
#include <cstdint>

namespace baton::testing {

/// A steady-clock time `ms` milliseconds after an arbitrary origin (an hour
/// past the clock's zero, so that times before it exist too).
inline std::chrono::steady_clock::time_point moment(int64_t ms) {
  return std::chrono::steady_clock::time_point{} + std::chrono::hours(1) +
         std::chrono::milliseconds(ms);
}

} // namespace baton::testing
