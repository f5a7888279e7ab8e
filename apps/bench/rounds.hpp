#pragma once

// A bench side's ratios round by round (`baton bench pipeline` and `baton
// bench data-parallel` with --repeat N: of its limit, and against PyTorch's
// 2 threads): the rounds run every side in turn, so a slow spell of the host
// weighs on both sides of a round's ratio alike, where the ratio of two
// medians may take each side from another round.

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
/// `units` x the reference's of the same round (the one-thread side's with
/// units = W: "of limit"; a peer's with 1); 0 where the reference's is 0.
std::vector<double> ratios_by_round(const std::vector<round_rate>& side,
                                    const std::vector<round_rate>& reference, int32_t units);

/// "0.84 0.86 0.83 (median 0.84)": `ratios` (not empty) in their order, and
/// their median (the upper one of an even count, as the benches' rows take).
std::string rounds_text(std::vector<double> ratios);

/// A parallel side's ratios round by round.
struct side_rounds {
  std::vector<double> of_limit;   ///< over W x the one-thread side
  std::vector<double> vs_pytorch; ///< over PyTorch's W-thread peer (empty: it did not run)

  /// "of limit 0.84 0.86 (median 0.86), vs PT 2t 0.93 0.95 (median 0.95)"
  /// (the peer as its column names it: `peer`), a part without rounds left
  /// out ("" for none).
  std::string text(const std::string& peer = "PT 2t") const;
};

} // namespace bench
} // namespace baton::apps
