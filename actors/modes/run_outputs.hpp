#pragma once

// A run's outputs in one place (run_outputs.cpp): the files it will write
// (--metrics-out, --curves, --trace, --save-model) checked before anything
// trains, so that a run of hours does not end with "cannot write" and
// nothing kept, and never one of the run's own inputs; then everything a
// finished run writes.

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/modes/run.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {

/// Checks each output `r` asks for: not a directory, its directory exists
/// and a file can be created there (the temporary file it will be written
/// through is created and removed), it is not one of the files the run
/// reads (`t`'s file, backbone checkpoint and TorchScript file, the
/// resumed run's record) and no two outputs are the same file.
/// errc::bad_file naming the flag, the path and the reason.
caf::error check_outputs(const run_request& r, const topology& t);

/// Writes what `r` asked for of a finished run, in this order: the results
/// table on stdout (shown even if a file then fails), --metrics-out (with
/// the data's normalisation), --curves, --trace, --save-model (by the job's
/// mode, from the topology the run trained, not the file as it is now),
/// then, once they are all written, the run record's finished step (a run
/// whose outputs failed may still be resumed), and where each file went.
caf::error write_outputs(const run_request& r, finished_run& run);

} // namespace modes
} // namespace baton::actors
