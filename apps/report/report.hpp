#pragma once

// The report of `baton compare` and `baton report`: DIR/report.json (every
// figure; schema docs/report.schema.json, described in docs/reports.md) and
// DIR/report.html (self-contained: plots drawn by gnuplot's SVG terminal,
// inlined; no script, nothing fetched).

#include <string>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "apps/args.hpp"

namespace baton::apps {

/// Writes `report` to DIR/report.json and draws DIR/report.html from it;
/// creates DIR. `report` has "runs" [run_record, apps/compare/run_record.hpp]
/// and optionally: "title", "workload" (the file), "target" (accuracy or
/// null), "cluster" {"local_nodes", "link" ("" loopback), or a
/// "description"}, "machine" (default: this_machine()), "skipped"
/// [{"strategy", "reason"}], "predictions" (apps/predict/predict.hpp; its
/// "projection" points {strategy, hosts, bandwidth (bytes/s),
/// samples_per_second} and "crossovers" [{sentence}] are drawn). A run's
/// optional "spread" (apps/compare/repeats.hpp) gives the min-max of its
/// repeated runs, drawn as whiskers; its optional "predicted"
/// {step_seconds, samples_per_second or samples_per_step} is checked
/// against its measured step. Adds "schema" ("baton-report/1"), "created",
/// "ranking" (indices into runs, best first), "recommendation"
/// (analysis.hpp), "prediction_check" and "plots" (name, title, caption).
/// Errors: gnuplot missing or failing, DIR not writable.
caf::expected<void> write_report(const nlohmann::json& report, const std::string& dir);

/// `baton report FILE... [--out DIR] [--target ACC]`: the same report from
/// existing files (metrics JSON of `baton run --metrics-out`, a report.json,
/// a bench's --json with "runs"). The exit code: 0, 2 for bad input.
int cmd_report(args& a);

} // namespace baton::apps
