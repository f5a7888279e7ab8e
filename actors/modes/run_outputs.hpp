#pragma once

// A run's outputs in one place (run_outputs.cpp): the files it will write
// (--metrics-out, --curves, --trace, --save-model) checked before anything
// trains, so that a run of hours does not end with "cannot write" and
// nothing kept, and never one of the run's own inputs; then everything a
// finished run writes.

#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/config/topology.hpp"
#include "actors/runtime/job_result.hpp"
#include "actors/runtime/jobs.hpp"

namespace baton::actors {
inline namespace modes {

struct mode;

/// Checks each output `r` asks for: not a directory, its directory exists
/// and a file can be created there (the temporary file it will be written
/// through is created and removed), it is not one of the files the run
/// reads (`t`'s file, backbone checkpoint and TorchScript file, the
/// resumed run's record) and no two outputs are the same file.
/// errc::bad_file naming the flag, the path and the reason.
caf::error check_outputs(const run_request& r, const topology& t);

/// What to tell of each result of `result` that learned nothing: its last
/// epoch's training loss at or above ln C for its task's C classes, the loss
/// of answering every class alike (a model that answers one class whatever
/// it sees ends there too). One warning per such result; none when every
/// result learned.
std::vector<std::string> untrained_results(const topology& t, const job_result& result);

/// Writes what `r` asked for of `result`, the run of `t` (the topology it
/// read once) by `job`, its mode, in this order: the results table on
/// stdout (shown even if a file then fails), --metrics-out (with the data's
/// normalisation, kept in `result`), --curves, --trace, --save-model (by
/// `job`, from `t`, not the file as it is now), then, once they are all
/// written, the run record's finished step (a run whose outputs failed may
/// still be resumed), and where each file went.
caf::error write_outputs(const run_request& r, const topology& t, const mode& job,
                         job_result& result);

} // namespace modes
} // namespace baton::actors
