#pragma once

// A bench side's ratio to its limit round by round (`baton bench pipeline`
// and `baton bench data-parallel` with --repeat N): the rounds run every side
// in turn, so a slow spell of the host weighs on both sides of a round's
// ratio alike, where the ratio of two medians may take each side from
// another round.

#include <cstdint>
#include <string>
#include <vector>

namespace baton::apps {
inline namespace bench {

/// A run's samples/s and the --repeat round it ran in (1, 2, ...).
struct round_rate {
  int32_t round = 1;
  double samples_per_second = 0;
};

/// For every round both ran in, in round order: the side's samples/s over
/// `units` x the one-thread side's (`one`) of the same round ("of limit";
/// 0 where that side's rate is 0).
std::vector<double> of_limit_by_round(const std::vector<round_rate>& side,
                                      const std::vector<round_rate>& one, int32_t units);

/// "0.84 0.86 0.83 (median 0.84)": `ratios` (not empty) in their order, and
/// their median (the upper one of an even count, as the benches' rows take).
std::string rounds_text(std::vector<double> ratios);

} // namespace bench
} // namespace baton::apps
