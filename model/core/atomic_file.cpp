#include "model/core/atomic_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/core/error.hpp"
#include "model/core/fd_io.hpp"

namespace baton::model {

namespace fs = std::filesystem;

namespace {

/// A name next to `path` that no other writer uses: the pid tells processes
/// apart, the counter the threads and calls of this one.
std::string temporary_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

/// Creates a new temporary file for `path` (O_EXCL: never one a crashed
/// writer left) and names it in `tmp`; -1 with errno on failure.
int create_temporary(const std::string& path, mode_t mode, std::string& tmp) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp = temporary_name(path);
    // O_EXCL alone already never follows a link; O_NOFOLLOW says so.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/// Makes the rename durable; a file system that cannot sync a directory
/// still has the file, so a failure here is not one of the write.
void sync_directory_of(const std::string& path) {
  auto dir = fs::path(path).parent_path();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string failure(const std::string& path, const std::string& step, int err, bool existed) {
  return "cannot write '" + path + "': " + step + std::strerror(err) + " (nothing was changed: " +
         (existed ? "the previous '" + path + "' is kept)" : std::string{"no file was made)"});
}

std::string cannot_write(const std::string& path, const std::string& why) {
  return "cannot write '" + path + "': " + why;
}

} // namespace

std::string symlink_refusal(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec)))
    return {};
  auto target = fs::read_symlink(path, ec);
  return "it is a symbolic link" + (ec ? std::string{} : " (to '" + target.string() + "')") +
         ": baton never writes through a link, which anyone who may write in its directory "
         "could have put there to make baton overwrite the file it points to; remove the "
         "link or name another file";
}

int open_for_writing(const std::string& path, int flags, mode_t mode, std::string& why) {
  // O_NONBLOCK: a FIFO is refused below, not waited on. O_TRUNC waits for
  // the checks: truncating first would empty a file hard-linked elsewhere.
  const bool truncate = (flags & O_TRUNC) != 0;
  int fd = ::open(path.c_str(), (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    int err = errno;
    auto link = err == ELOOP ? symlink_refusal(path) : std::string{};
    why = cannot_write(path, link.empty() ? std::string{std::strerror(err)} : link);
    return -1;
  }
  struct stat st {};
  const char* wrong = nullptr;
  if (::fstat(fd, &st) != 0)
    wrong = "cannot stat it";
  else if (!S_ISREG(st.st_mode))
    wrong = "it is not a regular file";
  else if (st.st_nlink > 1)
    wrong = "it has other hard links (writing it would change them too)";
  if (wrong == nullptr && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    wrong = "cannot make it blocking";
  if (wrong == nullptr && truncate && ::ftruncate(fd, 0) != 0)
    wrong = "cannot truncate it";
  if (wrong != nullptr) {
    ::close(fd);
    why = cannot_write(path, wrong);
    return -1;
  }
  return fd;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  auto x = fs::weakly_canonical(a, ec);
  auto y = fs::weakly_canonical(b, ec);
  if (!x.empty() && x == y)
    return true;
  return fs::equivalent(a, b, ec) && !ec;
}

std::string replacement_refusal(const std::string& path) {
  // rename(2) would replace the link, not follow it; refused all the same:
  // the link was not baton's, and a user who meant its target learns why.
  if (auto link = symlink_refusal(path); !link.empty())
    return link;
  // rename(2) would replace a device or a FIFO with a file: run as root,
  // `--out /dev/null` would have left every process a regular /dev/null.
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (ec || !fs::exists(status) || fs::is_regular_file(status))
    return {};
  return fs::is_directory(status)
           ? "it is a directory (name a file in it)"
           : "it is not a regular file (a device, a FIFO or a socket): baton writes files "
             "only, and replacing it would remove it";
}

std::string missing_directory(const std::string& path) {
  const auto dir = fs::path(path).parent_path();
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec))
    return {};
  return fs::exists(dir, ec) ? dir.string() + " is not a directory"
                             : "the directory " + dir.string() + " does not exist";
}

std::string try_replace_file(const std::string& path, std::string_view bytes, mode_t mode) {
  if (auto why = replacement_refusal(path); !why.empty())
    return cannot_write(path, why);
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  std::string tmp;
  int fd = create_temporary(path, mode, tmp);
  if (fd < 0)
    return failure(path, "cannot create a temporary file next to it: ", errno, existed);
  const char* step = nullptr; // the step that failed, if one did
  if (!write_all(fd, bytes.data(), bytes.size()))
    step = "";
  else if (::fsync(fd) != 0)
    step = "fsync: ";
  int err = errno;
  if (::close(fd) != 0 && step == nullptr) {
    step = "close: ";
    err = errno;
  }
  if (step == nullptr && ::rename(tmp.c_str(), path.c_str()) != 0) {
    step = "cannot rename the temporary file over it: ";
    err = errno;
  }
  if (step != nullptr) {
    ::unlink(tmp.c_str());
    return failure(path, step, err, existed);
  }
  sync_directory_of(path);
  return {};
}

std::string try_check_writable(const std::string& path) {
  if (auto why = replacement_refusal(path); !why.empty())
    return cannot_write(path, why);
  std::error_code ec;
  if (auto dir = fs::path(path).parent_path(); !dir.empty())
    fs::create_directories(dir, ec);
  if (ec)
    return "cannot write '" + path + "': cannot make its directory (" + ec.message() + ")";
  std::string tmp;
  int fd = create_temporary(path, 0600, tmp);
  if (fd < 0)
    return "cannot write '" + path + "': cannot create a file next to it: " + std::strerror(errno);
  ::close(fd);
  ::unlink(tmp.c_str());
  return {};
}

void replace_file(const std::string& path, std::string_view bytes, mode_t mode) {
  if (auto why = try_replace_file(path, bytes, mode); !why.empty())
    throw file_error(why);
}

} // namespace baton::model
