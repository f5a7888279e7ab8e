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

constexpr uint64_t slab_magic = 0x62617473'6c616232; // "batslab2"

/// The first bytes of a slab; its data follow at data_offset.
struct slab_header {
  uint64_t magic;
  uint64_t capacity; ///< bytes after the header
  /// The writer's tensor (slab_tensor) while it lives, and each message sent
  /// from the slab until its receiver's tensor goes: free for its writer at 0.
  std::atomic<uint32_t> holds;
  /// Messages sent from the slab that no receiver took yet.
  std::atomic<uint32_t> unclaimed;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

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

/// A slab as this process maps it (its own or another process's): unmapped
/// when the registry forgets it and the last tensor of its bytes is gone.
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
  std::map<std::string, std::shared_ptr<mapped_slab>> own;
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
  auto slab = std::make_shared<mapped_slab>();
  auto& m = slab->m;
  m.size = data_offset + capacity;
  m.fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (m.fd < 0)
    return make_error(errc::payload_too_large, "cannot create " + path + ": " + error_text());
  if (::ftruncate(m.fd, static_cast<off_t>(m.size)) != 0) {
    auto why = error_text();
    ::unlink(path.c_str());
    return make_error(errc::payload_too_large, "cannot size " + path + ": " + why);
  }
  void* p = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (p == MAP_FAILED) {
    auto why = error_text();
    ::unlink(path.c_str());
    return make_error(errc::payload_too_large, "cannot map " + path + ": " + why);
  }
  m.base = static_cast<char*>(p);
  new (m.base) slab_header{slab_magic, capacity, {0}, {0}};
  r.own_bytes += m.size;
  r.own.emplace(name, std::move(slab));
  return name;
}

/// The smallest free slab of this process with room for `bytes`, made when
/// none is free; its name.
caf::expected<std::string> free_slab(slab_registry& r, size_t bytes) {
  const std::string* chosen = nullptr;
  size_t chosen_capacity = 0;
  for (auto& [name, slab] : r.own) {
    const auto* h = slab->m.header();
    if (h->capacity >= bytes && h->holds.load(std::memory_order_acquire) == 0 &&
        (chosen == nullptr || h->capacity < chosen_capacity)) {
      chosen = &name;
      chosen_capacity = h->capacity;
    }
  }
  if (chosen != nullptr)
    return *chosen;
  size_t capacity = shared_memory_threshold;
  while (capacity < bytes)
    capacity *= 2;
  if (r.own_bytes + data_offset + capacity > max_slab_bytes)
    return make_error(errc::payload_too_large, "the slabs of this process are all busy");
  return make_slab(r, capacity);
}

/// A tensor of `shape` at `data`, in `slab`, that the slab holds until the
/// tensor and its views go.
at::Tensor held_tensor(const std::shared_ptr<mapped_slab>& slab, char* data,
                       at::IntArrayRef shape, at::TensorOptions options) {
  auto* h = slab->m.header();
  return at::from_blob(
    data, shape,
    [keep = slab, h](void*) { h->holds.fetch_sub(1, std::memory_order_acq_rel); }, options);
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

at::Tensor slab_tensor(int64_t numel) {
  const auto bytes = static_cast<size_t>(numel) * sizeof(float);
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  auto name = free_slab(r, bytes);
  if (!name)
    return {};
  const auto& slab = r.own.at(*name);
  slab->m.header()->holds.store(1, std::memory_order_release);
  return held_tensor(slab, slab->m.base + data_offset, {numel}, at::kFloat);
}

caf::expected<shared_place> share_bytes(const void* data, size_t bytes) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  // Bytes in a slab of this process already (slab_tensor's, held by the
  // caller's tensor): counted, not copied.
  const auto* at = static_cast<const char*>(data);
  for (auto& [name, slab] : r.own) {
    const char* begin = slab->m.base + data_offset;
    auto* h = slab->m.header();
    if (at >= begin && at < begin + h->capacity &&
        bytes <= h->capacity - static_cast<size_t>(at - begin)) {
      h->holds.fetch_add(1, std::memory_order_acq_rel);
      h->unclaimed.fetch_add(1, std::memory_order_release);
      return shared_place{name, static_cast<uint64_t>(at - begin)};
    }
  }
  auto name = free_slab(r, bytes);
  if (!name)
    return name.error();
  auto& m = r.own.at(*name)->m;
  std::memcpy(m.base + data_offset, data, bytes);
  m.header()->holds.store(1, std::memory_order_relaxed);
  m.header()->unclaimed.store(1, std::memory_order_release);
  return shared_place{*name, 0};
}

caf::error take_bytes(const std::string& name, uint64_t offset, uint64_t bytes,
                      at::IntArrayRef shape, at::TensorOptions options, const std::string& what,
                      at::Tensor& out) {
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
  if (h->magic != slab_magic || h->capacity > m.size - data_offset || offset > h->capacity ||
      bytes > h->capacity - offset)
    return make_error(errc::malformed_message,
                      what + ": its shared memory " + path + " holds no " +
                        std::to_string(bytes) + " bytes at offset " + std::to_string(offset));
  uint32_t unclaimed = h->unclaimed.load(std::memory_order_acquire);
  do {
    if (unclaimed == 0)
      return make_error(errc::malformed_message,
                        what + ": its shared memory " + path +
                          " holds no message to take (taken already)");
  } while (!h->unclaimed.compare_exchange_weak(unclaimed, unclaimed - 1,
                                               std::memory_order_acq_rel));
  // The tensor is the slab's bytes (no copy), held until the tensor goes.
  // The mapping lives as long as the tensor, even past stop_slabs.
  out = held_tensor(*slab, m.base + data_offset + offset, shape, options);
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
  for (const auto& [name, slab] : r.own)
    ::unlink((directory + name).c_str());
  r.own.clear(); // unmapped as the tensors of their bytes go
  r.own_bytes = 0;
  r.mapped.clear();
}

} // namespace baton::messages::detail
