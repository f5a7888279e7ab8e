#include "model/core/fd_io.hpp"

#include <cerrno>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace baton::model {

namespace {

/// Whether `fd` has something to read within `timeout_ms` (< 0: it blocks
/// in read instead); errno ETIMEDOUT when it has not.
bool readable(int fd, int timeout_ms) {
  if (timeout_ms < 0)
    return true;
  pollfd p{fd, POLLIN, 0};
  int ready = ::poll(&p, 1, timeout_ms);
  if (ready == 0)
    errno = ETIMEDOUT;
  return ready > 0;
}

} // namespace

bool write_all(int fd, const char* data, size_t n) {
  bool socket = true; // until send says otherwise
  while (n > 0) {
    ssize_t w = socket ? ::send(fd, data, n, MSG_NOSIGNAL) : ::write(fd, data, n);
    if (w < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      errno = w == 0 ? EIO : errno;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* data, size_t n, int timeout_ms) {
  while (n > 0) {
    if (!readable(fd, timeout_ms))
      return false;
    ssize_t r = ::read(fd, data, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

} // namespace baton::model
