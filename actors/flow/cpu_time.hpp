#pragma once

// CPU time as the kernel counts it (user + system), of the calling thread and
// of the whole process: what activity (flow/activity.hpp) measures an
// actor's computations and its process with.

#include <sys/types.h>

namespace baton::actors {
inline namespace flow {

/// CPU seconds (user + system) of the calling thread.
double thread_cpu_seconds();

/// CPU seconds (user + system) of this process, every thread.
double process_cpu_seconds();

/// CPU seconds (user + system) of process `pid`, every thread; -1 when it
/// cannot be read (gone, or another user's).
double process_cpu_seconds(pid_t pid);

} // namespace flow
} // namespace baton::actors
