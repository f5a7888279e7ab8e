#pragma once
// `baton` commands forked from a zygote (apps/zygote.hpp) instead of exec'd:
// the suite's first command starts one `baton` process with
// BATON_TEST_ZYGOTE set, which has loaded LibTorch once, and every command
// after it is a child forked from that process (~0.55 s of CPU less each).
// The zygote ends with the suite's process. BATON_TEST_NO_ZYGOTE=1 turns it
// off (every command exec'd, as before).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace baton::testing {

/// A command the zygote started.
struct zygote_child {
  pid_t pid = -1;
  int connection = -1; ///< where its end is told
};

/// Starts `baton ARGS...` with stdin from /dev/null and stdout and stderr
/// to `output`; std::nullopt when there is no zygote (it could not start, it
/// is turned off, or the environment differs from the zygote's in a variable
/// a library reads as it loads: OMP_*, GOMP_*, MALLOC_*, LD_*, OPENBLAS_*),
/// and the caller execs baton instead.
std::optional<zygote_child> zygote_start(const std::vector<std::string>& args, int output);

/// Blocks until the child ends: its wait status (as waitpid's) and peak
/// resident set in KiB; closes the connection. -1 and -1 when the zygote
/// went away first.
std::pair<int, int64_t> zygote_wait(zygote_child& child);

} // namespace baton::testing
