#include "model/core/bounded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace baton::model {

namespace {

/// What a non-regular file is, for "not a regular file (a directory)".
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO or pipe";
  return S_ISSOCK(mode) ? "a socket" : "an unknown kind of file";
}

std::string too_large(uintmax_t size, size_t max_bytes, const std::string& kind) {
  const auto in_units = max_bytes >= (size_t{1} << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                       : std::to_string(max_bytes >> 10) + " KiB";
  return std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " ("
         + in_units + ") " + kind + " may have";
}

} // namespace

std::string read_bounded_file(const std::string& path, std::string& out, size_t max_bytes,
                              const std::string& kind) {
  // O_NONBLOCK: opening a FIFO that has no writer would otherwise block
  // before fstat could refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return std::strerror(errno);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_at_end{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    return std::strerror(errno);
  if (!S_ISREG(info.st_mode))
    return "not a regular file (" + file_kind(info.st_mode) + ")";
  if (static_cast<uintmax_t>(info.st_size) > max_bytes)
    return too_large(static_cast<uintmax_t>(info.st_size), max_bytes, kind);
  out.clear();
  char buffer[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return std::strerror(errno);
    if (got == 0)
      return "";
    out.append(buffer, static_cast<size_t>(got));
    if (out.size() > max_bytes) // it grew after fstat
      return too_large(out.size(), max_bytes, kind) + " (it grew while read)";
  }
}

} // namespace baton::model
