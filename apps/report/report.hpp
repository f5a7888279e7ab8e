#pragma once

// The report of `baton compare` and `baton report`: DIR/report.json (every
// figure, schema in docs/comparing.md#reportjson) and DIR/report.html
// (self-contained: plots drawn by gnuplot's SVG terminal, inlined).

#include <string>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "apps/args.hpp"

namespace baton::apps {

/// Writes `report` (schema "baton-report/1": workload, cluster, machine,
/// runs [run_record], skipped, predictions) to DIR/report.json and draws
/// DIR/report.html from it. Creates DIR.
caf::expected<void> write_report(const nlohmann::json& report, const std::string& dir);

/// `baton report FILE... [--out DIR]`: the same report from existing files
/// (metrics JSON of `baton run --metrics-out`, a report.json, a bench's
/// --json). The exit code.
int cmd_report(args& a);

} // namespace baton::apps
