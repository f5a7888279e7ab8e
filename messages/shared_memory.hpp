#pragma once

// Tensor bytes between node processes of one real host, as NCCL and gloo
// pass them: through buffers in /dev/shm that both processes map once and
// then reuse, so that a message costs one copy (into the buffer) and no
// page fault, instead of the kernel's TCP copies. A sender keeps slabs
// (files "baton-slab-PID-N" in /dev/shm, mode 0600): it copies a large
// tensor into a free one, marks it sent in its header and sends its name;
// the receiver maps the slab (once, cached), checks the header, marks it
// taken and receives a tensor that is the slab's bytes; when that tensor
// goes, the slab is free for its writer again (a writer whose slabs are all
// taken makes another one). Used by codec.cpp on the path of messages that
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

/// Copies `bytes` bytes at `data` into a free slab of this process (made
/// when none is free) and returns the slab's name. Fails when no slab can
/// be made (no /dev/shm, full, max_slab_bytes reached): the caller sends
/// the bytes in the message instead.
caf::expected<std::string> share_bytes(const void* data, size_t bytes);

/// The tensor of `shape` and `options` (`bytes` bytes) in the sent slab
/// `name`, in `out`: the slab's own bytes, which it is the receiver's until
/// `out` and its views go (then the slab is free again). Fails with
/// malformed_message for a name that share_bytes never makes or a slab
/// that holds no such message (taken already, another length), with
/// shape_mismatch for a file that is not a slab of this user, and with
/// payload_too_large when it is missing or cannot be mapped; `what` names
/// the tensor in the error.
caf::error take_bytes(const std::string& name, uint64_t bytes, at::IntArrayRef shape,
                      at::TensorOptions options, const std::string& what, at::Tensor& out);

/// Turns the slabs on: removes the slab files of processes that no longer
/// run and arranges for this process's own to go at its exit.
void start_slabs();

/// Forgets every slab: this process's own are unmapped and removed, the
/// mappings of other processes' slabs closed.
void stop_slabs();

} // namespace baton::messages::detail
