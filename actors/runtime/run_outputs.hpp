#pragma once

// The files a run writes (--metrics-out, --curves, --trace, --save-model): checked
// before anything trains, so that a run of hours does not end with "cannot
// write" and nothing kept; and never one of the run's own inputs.

#include <string>
#include <vector>

#include <caf/error.hpp>

namespace baton::actors {
inline namespace runtime {

/// A file a run will write, and the flag that named it.
struct output_file {
  std::string flag; ///< "--metrics-out"
  std::string path; ///< empty: not asked for
};

/// Checks each output: not a directory, its directory exists and a file can
/// be created there (the temporary file it will be written through is
/// created and removed), it is not one of `inputs` (files the run reads:
/// topology, backbone checkpoint, ...) and no two outputs are the same file.
/// errc::bad_file naming the flag, the path and the reason.
caf::error check_outputs(const std::vector<output_file>& outputs,
                         const std::vector<std::string>& inputs);

} // namespace runtime
} // namespace baton::actors
