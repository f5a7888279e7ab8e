#include "model/core/data_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "model/core/error.hpp"

namespace baton::model {

namespace {

namespace fs = std::filesystem;

/// Whether `path` (already resolved) lies in `root` (already resolved).
bool lies_in(const fs::path& path, const fs::path& root) {
  auto root_end = std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first;
  // A root spelled with a trailing '/' ends in an empty element.
  return root_end == root.end() || (std::next(root_end) == root.end() && root_end->empty());
}

std::string list_of(const std::vector<std::string>& roots) {
  std::string list;
  for (const auto& root : roots)
    list += (list.empty() ? "" : ", ") + root;
  return list;
}

/// "P: resolved to 'R', outside the node's data_dirs (A, B)".
std::string outside_message(const std::string& path, const root_check& c,
                            const std::vector<std::string>& roots) {
  return path + ": resolved to '" + c.resolved + "', outside the node's data_dirs (" +
         list_of(roots) + ")";
}

/// What `mode` is, for a file that is not a regular one.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "of an unknown type";
}

} // namespace

root_check check_roots(const std::string& path, const std::vector<std::string>& roots) {
  std::error_code ec;
  root_check c;
  c.resolved = fs::weakly_canonical(path, ec).string();
  if (roots.empty())
    return c;
  c.inside = false;
  if (ec)
    return c;
  for (const auto& root : roots) {
    auto resolved_root = fs::weakly_canonical(root, ec);
    if (!ec && lies_in(c.resolved, resolved_root)) {
      c.inside = true;
      break;
    }
  }
  return c;
}

namespace {

std::mutex roots_mutex;
std::vector<std::string>& roots_store() {
  static std::vector<std::string> roots;
  return roots;
}

} // namespace

void set_data_roots(std::vector<std::string> roots) {
  std::lock_guard<std::mutex> lock(roots_mutex);
  roots_store() = std::move(roots);
}

std::vector<std::string> data_roots() {
  std::lock_guard<std::mutex> lock(roots_mutex);
  return roots_store();
}

void check_data_dir(const std::string& path) {
  const auto roots = data_roots();
  const root_check c = check_roots(path, roots);
  if (!c.inside)
    throw file_error(outside_message(path, c, roots));
}

data_file::data_file(const std::string& path, const std::string& expected) : path_(path) {
  const auto roots = data_roots();
  // realpath, then open the resolved name without following a last symlink:
  // a link swapped in between is refused, not followed.
  std::unique_ptr<char, decltype(&std::free)> resolved{::realpath(path.c_str(), nullptr),
                                                       &std::free};
  if (!resolved)
    throw file_error(path + ": cannot open: " + std::strerror(errno) + " (expected " + expected +
                     ")");
  if (!roots.empty()) {
    const root_check c = check_roots(resolved.get(), roots);
    if (!c.inside)
      throw file_error(outside_message(path, {resolved.get(), false}, roots));
  }
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  fd_ = ::open(resolved.get(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0)
    throw file_error(path + ": cannot open: " + std::strerror(errno) + " (expected " + expected +
                     ")");
  struct stat st{};
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    const std::string kind = stat_ok ? kind_of(st.st_mode) : std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw file_error(path + ": cannot open: not a regular file (" + kind + "; expected " +
                     expected + ")");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<int64_t>(st.st_size);
}

data_file::~data_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

data_file::data_file(data_file&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

void data_file::read_at(int64_t offset, void* out, size_t n, const std::string& what) const {
  auto* bytes = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, bytes + done, std::min<size_t>(n - done, size_t{1} << 30),
                                static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw file_error(path_ + ": read error in " + what + ": " + std::strerror(errno));
    if (got == 0)
      throw file_error(path_ + ": truncated: expected " + std::to_string(n) + " bytes of " +
                       what + ", got " + std::to_string(done));
    done += static_cast<size_t>(got);
  }
}

int data_file::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

} // namespace baton::model
