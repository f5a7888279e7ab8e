#pragma once

// The heap of CPU tensors' storage, installed in every process that links
// model/core before main runs (tensor_heap.cpp).
//
// baton's processes run on glibc's arenas, one per thread (apps/tuned_heap.cpp
// keeps blocks out of mmap and the free heap for reuse). A thread's arena
// cannot hold a block over 64 MiB: glibc maps each such block afresh and
// unmaps it on free, so every step's large gradients, buckets and weights
// would be new pages, zeroed by the kernel. Until 2026-12-04 every thread
// therefore shared the one main arena, and the threads of one process that
// computed side by side waited on its lock: two lanes of `--mode local
// --threads 2` on a small CNN (steps of 4-6 ms) ran 25-32% slower than with
// an arena each. Now a tensor of `tensor_heap_large_block` bytes or more is
// mapped by this heap and kept for reuse when freed (up to
// `tensor_heap_kept_bytes`, the smallest kept block that fits taken first),
// and every smaller one comes from the allocating thread's arena.
//
// BATON_TENSOR_HEAP=0 in the environment leaves LibTorch's own allocator in
// place (with MALLOC_ARENA_MAX=1, the heap before this change).

#include <cstddef>

namespace baton::model {

/// A tensor this large or larger is mapped by the heap, not malloc'd.
inline constexpr std::size_t tensor_heap_large_block = std::size_t{16} << 20;
/// The most the heap keeps of freed large blocks; beyond it they are unmapped.
inline constexpr std::size_t tensor_heap_kept_bytes = std::size_t{2} << 30;

/// Whether the heap is LibTorch's CPU allocator in this process.
bool tensor_heap_installed();

} // namespace baton::model
