#pragma once

// The transfer job without the shared actor run: its one-process reference
// (`--mode local`), its baseline (`--baseline separate`: one process per
// head, each repeating the backbone's forward) and the pre-training of a
// missing backbone.

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

/// `--mode local`: every head (or `--only-head`) trained in this process on
/// the frozen backbone, with `--threads` (default: every core).
caf::expected<job_result> run_transfer_local(const topology& t, const run_request& r);

/// `--baseline separate`: one `baton run --mode local --only-head H` process
/// per head, the cores shared among them; their results merged.
caf::expected<job_result> run_separate(const topology& t, const run_request& r);

/// Makes the backbone checkpoint by pre-training if it is missing (and says
/// so), or always with `force` (`baton pretrain`). Nothing happens when the
/// topology has no checkpoint.
caf::expected<void> ensure_pretrained(const topology& t, bool force = false);

} // namespace transfer
} // namespace modes
} // namespace baton::actors
