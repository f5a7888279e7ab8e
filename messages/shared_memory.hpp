#pragma once

// Tensor bytes between node processes of one real host, as NCCL and gloo
// pass them: through buffers in /dev/shm that both processes map once and
// then reuse, so that a message costs at most one copy (into the buffer)
// and no page fault, instead of the kernel's TCP copies. A sender keeps
// slabs (files "baton-slab-PID-N" in /dev/shm, mode 0600). It copies a large
// tensor into a free one, or, when the tensor's bytes are in one of its
// slabs already (slab_tensor: a gradient bucket written there as the
// backward runs), copies nothing; it counts the message in the slab's
// header and sends the slab's name and the bytes' offset. The receiver maps
// the slab (once, cached), checks the header and the range, takes the
// message (one fewer unclaimed) and receives a tensor that is the slab's
// bytes. A slab holds its writer's tensor while that lives and each message
// until its receiver's tensor goes; with no holder it is free for its
// writer again (a writer whose slabs are all held makes another one). Used by codec.cpp on the path of messages that
// cross a process, only when use_shared_memory(true) said that every
// process of the job runs on this host (local node processes on 127.0.0.1,
// never emulated hosts: their bytes must cross the shaped link). The
// processes trust each other as far as their user does: a process of the
// same user that cut a slab file short while a receiver held its tensor
// would crash the receiver (SIGBUS) on its next read, as it could by
// writing into its memory.
// Internal to messages/.

#include <cstddef>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

namespace baton::messages::detail {

/// Tensors of at least this many bytes go through shared memory when it is
/// in use; smaller ones are cheaper inside the message.
constexpr size_t shared_memory_threshold = size_t{1} << 20;

/// The most bytes of slabs one process keeps; beyond, tensors go in the
/// message.
constexpr size_t max_slab_bytes = size_t{1} << 30;

/// Where a message's bytes are: a slab and the offset of the bytes in it.
struct shared_place {
  std::string name;
  uint64_t offset = 0;
};

/// An uninitialised float32 tensor of `numel` elements in a free slab of
/// this process (made when none is free), held by the slab until the tensor
/// and its views go: a message of it, or of a view of it, copies nothing.
/// Undefined when no slab can be made.
at::Tensor slab_tensor(int64_t numel);

/// Counts a message of `bytes` bytes at `data` in the slab that holds them
/// (slab_tensor's), or copies them into a free slab of this process (made
/// when none is free); returns where they are. Fails when no slab can be
/// made (no /dev/shm, full, max_slab_bytes reached): the caller sends the
/// bytes in the message instead.
caf::expected<shared_place> share_bytes(const void* data, size_t bytes);

/// The tensor of `shape` and `options` (`bytes` bytes at `offset`) of a
/// message in slab `name`, in `out`: the slab's own bytes, which it holds
/// until `out` and its views go. Fails with malformed_message for a name
/// that share_bytes never makes, a range past the slab's end or a slab
/// with no message left to take (taken already), with shape_mismatch for a
/// file that is not a slab of this user, and with payload_too_large when it
/// is missing or cannot be mapped; `what` names the tensor in the error.
caf::error take_bytes(const std::string& name, uint64_t offset, uint64_t bytes,
                      at::IntArrayRef shape, at::TensorOptions options, const std::string& what,
                      at::Tensor& out);

/// Turns the slabs on: removes the slab files of processes that no longer
/// run and arranges for this process's own to go at its exit.
void start_slabs();

/// Forgets every slab: this process's own are unmapped and removed, the
/// mappings of other processes' slabs closed.
void stop_slabs();

} // namespace baton::messages::detail
