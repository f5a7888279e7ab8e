// The heap of CPU tensors' storage (model/core/tensor_heap.hpp): installed
// before main, large blocks kept and reused, small ones aligned as
// LibTorch's own, tensors freed on another thread than the one that made them.

#include <cstdint>
#include <thread>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include "model/core/tensor_heap.hpp"

using namespace baton::model;

namespace {

constexpr int64_t floats_of(std::size_t bytes) {
  return static_cast<int64_t>(bytes / sizeof(float));
}

TEST(tensor_heap, is_the_cpu_allocator_of_a_process_that_links_model_core) {
  ASSERT_TRUE(tensor_heap_installed());
  EXPECT_NE(c10::GetCPUAllocator(), c10::GetDefaultCPUAllocator());
  at::Tensor t = at::empty({16}, at::kFloat);
  EXPECT_EQ(t.storage().allocator(), c10::GetCPUAllocator());
}

TEST(tensor_heap, a_freed_large_block_serves_the_next_tensor_of_its_size) {
  // A size no other test's tensors come near, so that no block kept before
  // fits it better.
  const int64_t n = 3 * floats_of(tensor_heap_large_block) + 1000;
  void* first = nullptr;
  {
    at::Tensor t = at::ones({n}, at::kFloat);
    first = t.data_ptr();
  }
  at::Tensor again = at::zeros({n}, at::kFloat);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(again.sum().item<float>(), 0.0f);
  // A slightly smaller one fits the same kept block; a much smaller is new.
  again.reset();
  at::Tensor smaller = at::empty({n - 1000}, at::kFloat);
  EXPECT_EQ(smaller.data_ptr(), first);
}

TEST(tensor_heap, blocks_are_aligned_as_libtorch_aligns_them) {
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, floats_of(tensor_heap_large_block)}) {
    at::Tensor t = at::empty({n}, at::kFloat);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u) << n;
  }
  EXPECT_EQ(at::empty({0}, at::kFloat).numel(), 0);
}

TEST(tensor_heap, a_tensor_made_on_one_thread_is_freed_on_another) {
  const int64_t large = floats_of(tensor_heap_large_block);
  at::Tensor small, big;
  std::thread maker{[&] {
    small = at::full({100}, 2.0f);
    big = at::full({large}, 3.0f);
  }};
  maker.join();
  EXPECT_EQ(small.sum().item<float>(), 200.0f);
  EXPECT_EQ(big[large - 1].item<float>(), 3.0f);
  std::thread freer{[small = std::move(small), big = std::move(big)]() mutable {
    small.reset();
    big.reset();
  }};
  freer.join();
}

TEST(tensor_heap, memory_it_cannot_have_is_libtorch_s_out_of_memory_error) {
  // 2^50 bytes: more than any machine maps.
  EXPECT_THROW(at::empty({int64_t{1} << 48}, at::kFloat), c10::OutOfMemoryError);
}

} // namespace
