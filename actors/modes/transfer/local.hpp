#pragma once

// The transfer job without the shared actor run: its one-process reference
// (`--mode local`), its baseline (`--baseline separate`: one process per
// head, each repeating the backbone's forward).

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

/// `--mode local`: every head (or `--only-head`) trained in this process on
/// the frozen backbone, with `--threads` (default: every core).
caf::expected<job_result> run_local(const topology& t, const run_request& r);

/// `--baseline separate`: one `baton run --mode local --only-head H` process
/// per head, the cores shared among them; their results merged.
caf::expected<job_result> run_separate(const topology& t, const run_request& r);

/// The mode's run without actors (mode::local): run_separate with
/// `--baseline separate`, else run_local.
caf::expected<job_result> run_without_actors(const topology& t, const run_request& r);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
