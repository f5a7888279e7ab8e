#pragma once

// What `baton report` accepts of a file before it reads one field of it: the
// rules of docs/report.schema.json (and of the metrics JSON, docs/outputs.md)
// for every field the report reads, checked in C++. A file is text of at most
// max_input_bytes, nested at most max_input_depth deep, whose numbers are all
// finite (JSON's 1e999 reads as inf) and whose fields have the types and
// ranges the report expects; anything else is refused naming the file and
// the field, never read into a crash (issue 32 item 6).

#include <cstddef>
#include <string>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

namespace baton::apps {

/// The largest input file read, bytes (a metrics JSON of a long run is a few MiB).
inline constexpr size_t max_input_bytes = size_t{256} << 20;

/// The deepest nesting of arrays and objects read: a report.json is about
/// ten deep; 100,000 nested objects would exhaust the stack of a recursive
/// reader, writer or destructor.
inline constexpr size_t max_input_depth = 64;

/// Reads and parses the JSON file at `path`, refusing (bad_file, naming
/// `path`) a file that is missing, not regular, larger than
/// max_input_bytes, nested deeper than max_input_depth, or not JSON.
caf::expected<nlohmann::json> read_input_json(const std::string& path);

/// Checks a metrics JSON of `baton run --metrics-out` read from `path`:
/// bad_file "PATH: FIELD: expected ..., got ..." for the first field of a
/// wrong type or out of range.
caf::expected<void> check_metrics_file(const nlohmann::json& metrics, const std::string& path);

/// Checks a report.json or a bench's JSON with a "runs" array read from
/// `path`: its runs (metrics, summary, predicted) and, for a report.json,
/// the header the report keeps (workload, target, machine, cluster,
/// skipped, predictions). Errors as check_metrics_file.
caf::expected<void> check_runs_file(const nlohmann::json& file, const std::string& path);

} // namespace baton::apps
