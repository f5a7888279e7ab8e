#include "messages/shared_memory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <ATen/ops/from_blob.h>

#include "messages/errc.hpp"

namespace baton::messages::detail {

namespace {

constexpr const char* directory = "/dev/shm/";

/// Every shared file's name starts so, followed by the writer's pid and a
/// number: "baton-tensor-PID-N".
constexpr const char* prefix = "baton-tensor-";

std::string error_text() {
  return std::strerror(errno);
}

/// The pid in a name of the form prefix + "PID-N", or -1 for any other name.
pid_t writer_of(const std::string& name) {
  const size_t start = std::strlen(prefix);
  if (name.size() > 64 || name.compare(0, start, prefix) != 0)
    return -1;
  const auto dash = name.find('-', start);
  if (dash == std::string::npos || dash == start || dash + 1 == name.size())
    return -1;
  for (size_t i = start; i < name.size(); ++i)
    if (i != dash && (name[i] < '0' || name[i] > '9'))
      return -1;
  return static_cast<pid_t>(std::strtol(name.c_str() + start, nullptr, 10));
}

/// Removes the shared files written by pids for which `gone` holds.
template <class Predicate>
void remove_files_of(Predicate gone) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir{::opendir(directory), ::closedir};
  if (!dir)
    return;
  while (auto entry = ::readdir(dir.get())) {
    std::string name = entry->d_name;
    auto pid = writer_of(name);
    if (pid > 0 && gone(pid))
      ::unlink((directory + name).c_str());
  }
}

void remove_own_files() {
  const auto self = ::getpid();
  remove_files_of([self](pid_t pid) { return pid == self; });
}

} // namespace

caf::expected<std::string> share_bytes(const void* data, size_t bytes) {
  static std::atomic<uint64_t> next{0};
  auto name = prefix + std::to_string(::getpid()) + "-" + std::to_string(next++);
  const auto path = directory + name;
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return make_error(errc::payload_too_large, "cannot create " + path + ": " + error_text());
  auto from = static_cast<const char*>(data);
  size_t written = 0;
  while (written < bytes) {
    auto n = ::write(fd, from + written, bytes - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto why = n < 0 ? error_text() : std::string{"nothing written"};
      ::close(fd);
      ::unlink(path.c_str());
      return make_error(errc::payload_too_large, "cannot write " + path + ": " + why);
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  return name;
}

caf::error take_bytes(const std::string& name, uint64_t bytes, at::IntArrayRef shape,
                      at::TensorOptions options, const std::string& what, at::Tensor& out) {
  if (writer_of(name) <= 0)
    return make_error(errc::malformed_message,
                      what + ": '" + name.substr(0, 64) + "' is not a shared tensor's name");
  const auto path = directory + name;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return make_error(errc::payload_too_large,
                      what + ": cannot open its shared memory " + path + ": " + error_text());
  // Whatever follows, the name goes: the file is this message's alone.
  ::unlink(path.c_str());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      static_cast<uint64_t>(st.st_size) != bytes) {
    ::close(fd);
    return make_error(errc::shape_mismatch,
                      what + ": its shared memory " + path + " is not a file of this user of " +
                        std::to_string(bytes) + " bytes");
  }
  // Shared, not private: a private writable mapping would copy every page
  // when populated; nobody else maps the file (its name is gone).
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return make_error(errc::payload_too_large,
                      what + ": cannot map its shared memory " + path + ": " + error_text());
  out = at::from_blob(p, shape, [bytes](void* q) { ::munmap(q, bytes); }, options);
  return caf::none;
}

void sweep_shared_files() {
  remove_files_of([](pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; });
  std::atexit(remove_own_files);
}

} // namespace baton::messages::detail
