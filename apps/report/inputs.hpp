#pragma once

// The files `baton report` reads: metrics JSON of `baton run --metrics-out`,
// report.json of `baton compare` or `baton report`, and a bench's --json
// with a "runs" array of run records.

#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

namespace baton::apps {

/// One report of the runs in `files`, in the order given: a metrics file is
/// one run (label: its file name without .json, strategy: its "mode", or
/// "local" for a run of --mode local; command unknown, its "source" the
/// file); a report.json or a bench's JSON gives its runs (summarized again
/// when `target` is given), the first report.json its workload, cluster,
/// machine, skipped strategies and predictions. Labels made unique. Errors
/// (bad_file), naming the file: missing or unreadable, not JSON, JSON of
/// another kind, a run without metrics.
caf::expected<nlohmann::json> report_from_files(const std::vector<std::string>& files,
                                                std::optional<double> target);

} // namespace baton::apps
