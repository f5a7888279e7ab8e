#pragma once

// A strategy run N times (`baton compare --repeat N`) as one row: the
// median of its runs and their spread, so that a slow spell of the host or
// one lucky run cannot pick the winner alone.
//
//   "spread": {"runs": 3,                       runs that wrote metrics
//              "failed": 0,                     runs that did not
//              "reached": 3,                    runs that reached the target
//              "time_to_target_seconds": {"median", "min", "max", "values"},
//              "samples_per_second": {...}, "step_seconds": {...}}
//   "repeats": [{"round", "command", "log", "summary" or "failed"}]

#include <vector>

#include <nlohmann/json.hpp>

namespace baton::apps {

/// {"median", "min", "max", "values"} of `values` (in the runs' order);
/// the median of an even count is the mean of the middle two. A null among
/// `values` (a run without the figure) makes median, min and max null.
nlohmann::json spread_of(const nlohmann::json& values);

/// The row of one strategy from its runs' records (run_record.hpp, in
/// round order; a failed run's has "failed" and no summary): the record of
/// its median run (by time to target, else samples per second) with the
/// median time to target, samples per second and step time in its
/// summary, "reached" only when every run that finished reached the
/// target, and the "spread" and "repeats" above. When no run finished: the
/// first failed record, with "repeats".
nlohmann::json combine_repeats(const std::vector<nlohmann::json>& records);

} // namespace baton::apps
