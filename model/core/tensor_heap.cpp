#include "model/core/tensor_heap.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

namespace baton::model {

namespace {

/// Each block starts with a header of one alignment unit (LibTorch's 64
/// bytes) holding the block's size, so that the deleter, given the data
/// pointer only, knows where the block goes back to.
constexpr std::size_t tensor_alignment = 64;
constexpr std::size_t large_block_unit = std::size_t{2} << 20;

std::size_t& block_size_of(void* data) {
  return *reinterpret_cast<std::size_t*>(static_cast<char*>(data) - tensor_alignment);
}

std::size_t round_up(std::size_t n, std::size_t unit) {
  return (n + unit - 1) / unit * unit;
}

/// A large block that cannot be mapped: LibTorch's error for memory it cannot have.
[[noreturn]] void out_of_memory(std::size_t bytes) {
  TORCH_CHECK_WITH(OutOfMemoryError, false,
                   "baton's tensor heap: not enough memory: you tried to allocate ", bytes,
                   " bytes");
  std::abort(); // not reached
}

void* block_of(void* data) {
  return static_cast<char*>(data) - tensor_alignment;
}

/// The large blocks: mapped once, kept by size for the next tensor.
class large_blocks {
public:
  /// A block of at least `size` bytes; `size` becomes the block's size.
  void* take(std::size_t& size) {
    {
      std::lock_guard lock{mutex_};
      // The smallest kept block that fits, if it wastes at most a quarter.
      auto kept = kept_.lower_bound(size);
      if (kept != kept_.end() && kept->first <= size + size / 4) {
        size = kept->first;
        void* block = kept->second;
        kept_.erase(kept);
        kept_bytes_ -= size;
        return block;
      }
    }
    void* block = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
      out_of_memory(size);
    return block;
  }

  void give(void* block, std::size_t size) {
    {
      std::lock_guard lock{mutex_};
      if (kept_bytes_ + size <= tensor_heap_kept_bytes) {
        kept_.emplace(size, block);
        kept_bytes_ += size;
        return;
      }
    }
    munmap(block, size);
  }

private:
  std::mutex mutex_;
  std::multimap<std::size_t, void*> kept_;
  std::size_t kept_bytes_ = 0;
};

large_blocks& the_large_blocks() {
  static auto* blocks = new large_blocks; // never destroyed: tensors may outlive statics
  return *blocks;
}

void free_tensor_block(void* data) {
  if (data == nullptr)
    return;
  std::size_t size = block_size_of(data);
  if (size >= tensor_heap_large_block)
    the_large_blocks().give(block_of(data), size);
  else
    c10::free_cpu(block_of(data));
}

class tensor_allocator final : public c10::Allocator {
public:
  c10::DataPtr allocate(std::size_t n) const override {
    const c10::Device cpu{c10::DeviceType::CPU};
    if (n == 0)
      return {nullptr, nullptr, &free_tensor_block, cpu};
    std::size_t size = round_up(tensor_alignment + n, tensor_alignment);
    void* block = nullptr;
    if (size >= tensor_heap_large_block) {
      size = round_up(size, large_block_unit);
      block = the_large_blocks().take(size);
    } else {
      block = c10::alloc_cpu(size); // LibTorch's own: aligned, its out-of-memory error
    }
    void* data = static_cast<char*>(block) + tensor_alignment;
    block_size_of(data) = size;
    return {data, data, &free_tensor_block, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_tensor_block;
  }
};

bool install_tensor_heap() {
  const char* setting = std::getenv("BATON_TENSOR_HEAP");
  if (setting != nullptr && std::string_view{setting} == "0")
    return false;
  static tensor_allocator allocator;
  // Above LibTorch's own (priority 0), whichever registers first.
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
  return true;
}

} // namespace

// Installed when the executable's static objects are built, after LibTorch's
// (a shared library, initialised first). model/core's users keep this object
// linked (`-u baton_tensor_heap_is_installed`, model/CMakeLists.txt).
extern "C" {
extern const bool baton_tensor_heap_is_installed;
const bool baton_tensor_heap_is_installed = install_tensor_heap();
}

bool tensor_heap_installed() {
  return baton_tensor_heap_is_installed;
}

} // namespace baton::model
