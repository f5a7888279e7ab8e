#pragma once

// Tensor bytes between node processes of one real host, as NCCL and gloo
// pass them: the sender writes a large tensor once into a new file in
// /dev/shm and sends its name; the receiver maps the file (no copy), removes
// its name and views the mapping as the tensor. Used by codec.cpp on the
// path of messages that cross a process, only when use_shared_memory(true)
// said that every process of the job runs on this host (local node
// processes on 127.0.0.1, never emulated hosts: their bytes must cross the
// shaped link). Internal to messages/.

#include <cstddef>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

namespace baton::messages::detail {

/// Tensors of at least this many bytes go through shared memory when it is
/// in use; smaller ones are cheaper inside the message.
constexpr size_t shared_memory_threshold = size_t{1} << 20;

/// Writes `bytes` bytes at `data` into a new file in /dev/shm readable by
/// this user only and returns its name (not a path). Fails when the file
/// cannot be made or written (no /dev/shm, full): the caller sends the bytes
/// in the message instead.
caf::expected<std::string> share_bytes(const void* data, size_t bytes);

/// The tensor of `shape` and `options` held by the shared file `name` (as
/// share_bytes named it), which must be a regular file of this user of
/// exactly `bytes` bytes; removes the name (the mapping lives as long as the
/// tensor). Fails with malformed_message for a name that share_bytes never
/// makes, with shape_mismatch for a file of another size, and with
/// payload_too_large when the file is missing or cannot be mapped; `what`
/// names the tensor in the error.
caf::error take_bytes(const std::string& name, uint64_t bytes, at::IntArrayRef shape,
                      at::TensorOptions options, const std::string& what, at::Tensor& out);

/// Removes the shared files of processes that no longer run (a crashed node
/// leaves the files nobody took), and, at this process's exit, its own that
/// nobody took. Called once when shared memory is turned on.
void sweep_shared_files();

} // namespace baton::messages::detail
