#pragma once

// Moving a whole buffer through a file descriptor, which read(2) and
// write(2) do not promise in one call. Only system calls, no allocation: a
// forked child of a threaded process may use them (apps/predict's link
// calibration does).

#include <cstddef>

namespace baton::model {

/// Writes all `n` bytes at `data` to `fd`, across short writes and EINTR.
/// False with errno on failure (EIO for a write that wrote nothing). To a
/// socket whose peer went away: false with EPIPE, not a SIGPIPE that ends
/// the process (send's MSG_NOSIGNAL).
bool write_all(int fd, const char* data, size_t n);

/// Reads exactly `n` bytes from `fd` into `data`, across short reads and
/// EINTR. With `timeout_ms` >= 0, waits at most that long for each chunk
/// (poll). False on end of file, failure (errno) or a timeout (ETIMEDOUT).
bool read_all(int fd, char* data, size_t n, int timeout_ms = -1);

} // namespace baton::model
