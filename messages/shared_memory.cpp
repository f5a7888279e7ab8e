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
#include <map>
#include <memory>
#include <mutex>

#include <ATen/ops/from_blob.h>

#include "messages/errc.hpp"

namespace baton::messages::detail {

namespace {

constexpr const char* directory = "/dev/shm/";

/// Every slab's name starts so, followed by the writer's pid and a number.
constexpr const char* prefix = "baton-slab-";

constexpr uint64_t slab_magic = 0x62617473'6c616231; // "batslab1"

/// The first bytes of a slab; the tensor's bytes follow at data_offset.
struct slab_header {
  uint64_t magic;
  uint64_t capacity;          ///< bytes after the header
  uint64_t length;            ///< bytes of the message it holds
  std::atomic<uint32_t> state; ///< slab_free, slab_sent or slab_taken
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

/// A slab's states: free for its writer; sent (share_bytes wrote a message
/// into it, no receiver took it yet); taken (a receiver's tensor is the
/// slab's bytes, until the receiver lets the tensor go).
constexpr uint32_t slab_free = 0;
constexpr uint32_t slab_sent = 1;
constexpr uint32_t slab_taken = 2;

constexpr size_t data_offset = 64;
static_assert(sizeof(slab_header) <= data_offset);

/// A mapped slab file.
struct mapping {
  int fd = -1;
  char* base = nullptr;
  size_t size = 0; ///< of the mapping (header included)
  slab_header* header() const { return reinterpret_cast<slab_header*>(base); }
};

void close_mapping(mapping& m) {
  if (m.base != nullptr)
    ::munmap(m.base, m.size);
  if (m.fd >= 0)
    ::close(m.fd);
  m = mapping{};
}

/// Another process's slab as this one maps it: unmapped when the registry
/// forgets it and the last tensor taken from it is gone.
struct mapped_slab {
  mapping m;
  mapped_slab() = default;
  mapped_slab(const mapped_slab&) = delete;
  mapped_slab& operator=(const mapped_slab&) = delete;
  ~mapped_slab() { close_mapping(m); }
};

/// This process's slabs (as a sender) and the slabs of others it maps (as
/// a receiver), by name.
struct slab_registry {
  std::mutex mutex;
  std::map<std::string, mapping> own;
  size_t own_bytes = 0;
  uint64_t next = 0;
  std::map<std::string, std::shared_ptr<mapped_slab>> mapped;
};

slab_registry& registry() {
  static auto* instance = new slab_registry; // outlives the exit handlers
  return *instance;
}

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

/// Removes the slab files written by pids for which `gone` holds.
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

/// A new slab of `capacity` data bytes, mapped; its name.
caf::expected<std::string> make_slab(slab_registry& r, size_t capacity) {
  auto name = prefix + std::to_string(::getpid()) + "-" + std::to_string(r.next++);
  const auto path = directory + name;
  mapping m;
  m.size = data_offset + capacity;
  m.fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (m.fd < 0)
    return make_error(errc::payload_too_large, "cannot create " + path + ": " + error_text());
  if (::ftruncate(m.fd, static_cast<off_t>(m.size)) != 0) {
    auto why = error_text();
    close_mapping(m);
    ::unlink(path.c_str());
    return make_error(errc::payload_too_large, "cannot size " + path + ": " + why);
  }
  void* p = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (p == MAP_FAILED) {
    auto why = error_text();
    close_mapping(m);
    ::unlink(path.c_str());
    return make_error(errc::payload_too_large, "cannot map " + path + ": " + why);
  }
  m.base = static_cast<char*>(p);
  new (m.base) slab_header{slab_magic, capacity, 0, {0}};
  r.own.emplace(name, m);
  r.own_bytes += m.size;
  return name;
}

/// The mapping of another process's slab `path`, mapped on first use.
caf::expected<std::shared_ptr<mapped_slab>> slab_of(slab_registry& r, const std::string& name,
                                                    const std::string& path,
                                                    const std::string& what) {
  if (auto it = r.mapped.find(name); it != r.mapped.end())
    return it->second;
  auto slab = std::make_shared<mapped_slab>();
  auto& m = slab->m;
  m.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (m.fd < 0)
    return make_error(errc::payload_too_large,
                      what + ": cannot open its shared memory " + path + ": " + error_text());
  struct stat st {};
  if (::fstat(m.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      static_cast<uint64_t>(st.st_size) < data_offset) {
    return make_error(errc::shape_mismatch,
                      what + ": its shared memory " + path + " is not a slab of this user");
  }
  m.size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (p == MAP_FAILED)
    return make_error(errc::payload_too_large,
                      what + ": cannot map its shared memory " + path + ": " + error_text());
  m.base = static_cast<char*>(p);
  r.mapped.emplace(name, slab);
  return slab;
}

} // namespace

caf::expected<std::string> share_bytes(const void* data, size_t bytes) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  const std::string* chosen = nullptr;
  for (auto& [name, m] : r.own)
    if (m.header()->capacity >= bytes &&
        m.header()->state.load(std::memory_order_acquire) == slab_free &&
        (chosen == nullptr || m.header()->capacity < r.own.at(*chosen).header()->capacity))
      chosen = &name;
  std::string made;
  if (chosen == nullptr) {
    size_t capacity = shared_memory_threshold;
    while (capacity < bytes)
      capacity *= 2;
    if (r.own_bytes + data_offset + capacity > max_slab_bytes)
      return make_error(errc::payload_too_large, "the slabs of this process are all busy");
    auto name = make_slab(r, capacity);
    if (!name)
      return name.error();
    made = std::move(*name);
    chosen = &made;
  }
  auto& m = r.own.at(*chosen);
  std::memcpy(m.base + data_offset, data, bytes);
  m.header()->length = bytes;
  m.header()->state.store(slab_sent, std::memory_order_release);
  return *chosen;
}

caf::error take_bytes(const std::string& name, uint64_t bytes, at::IntArrayRef shape,
                      at::TensorOptions options, const std::string& what, at::Tensor& out) {
  if (writer_of(name) <= 0)
    return make_error(errc::malformed_message,
                      what + ": '" + name.substr(0, 64) + "' is not a shared tensor's name");
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  const auto path = directory + name;
  auto slab = slab_of(r, name, path, what);
  if (!slab)
    return slab.error();
  auto& m = (*slab)->m;
  // The file may have been cut since it was mapped: reading past its end
  // would be a SIGBUS.
  struct stat st {};
  if (::fstat(m.fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < m.size) {
    r.mapped.erase(name);
    return make_error(errc::shape_mismatch,
                      what + ": its shared memory " + path + " was cut short");
  }
  auto* h = m.header();
  uint32_t sent = slab_sent;
  if (h->magic != slab_magic || h->capacity > m.size - data_offset || h->length != bytes ||
      !h->state.compare_exchange_strong(sent, slab_taken, std::memory_order_acq_rel))
    return make_error(errc::malformed_message,
                      what + ": its shared memory " + path + " holds no message of " +
                        std::to_string(bytes) + " bytes (taken already, or another one)");
  // The tensor is the slab's bytes (no copy): the slab is the receiver's
  // until the tensor goes, then free for its writer again. The mapping
  // lives as long as the tensor, even past stop_slabs.
  out = at::from_blob(
    m.base + data_offset, shape,
    [keep = *slab, h](void*) { h->state.store(slab_free, std::memory_order_release); },
    options);
  return caf::none;
}

void start_slabs() {
  remove_files_of([](pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; });
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(remove_own_files); });
}

void stop_slabs() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  for (auto& [name, m] : r.own) {
    close_mapping(m);
    ::unlink((directory + name).c_str());
  }
  r.own.clear();
  r.own_bytes = 0;
  r.mapped.clear(); // unmapped as the tensors taken from them go
}

} // namespace baton::messages::detail
