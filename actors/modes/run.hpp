#pragma once

// The `baton` commands over a topology: `baton run` (the request's job, run
// by its mode), `baton pretrain`, and `baton profile` and `baton plan`
// (planning.hpp). What apps/ reaches of the modes, with registry.hpp.

#include <caf/expected.hpp>

#include "actors/modes/planning.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {

/// Runs the job the request describes with its mode (registry.hpp): the
/// mode's plan with actors (embedded, on listed nodes or on --local-nodes),
/// its one-process reference (--mode local) or its baseline (--baseline
/// separate). Flags the mode does not offer are refused first. The output
/// files are checked before anything trains (writable, not a directory, not
/// an input of the run: check_outputs) and written once it has trained,
/// also when a part of it failed (write_outputs, run_outputs.hpp): what it
/// returns is the result as written; an error is a run that did not train
/// or whose outputs could not be written.
caf::expected<job_result> run_job(const run_request& r);

/// `baton pretrain`: pre-trains the backbone of the request's topology and
/// writes its checkpoint (backbone.checkpoint), whether or not one exists.
caf::error pretrain(const run_request& r);

} // namespace modes
} // namespace baton::actors
