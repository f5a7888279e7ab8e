#pragma once

// The CPU this process spends on the messages that cross it, to or from
// another process: serialising them (codec.cpp's CAF path: capnp, a large
// tensor's bytes copied into CAF's buffer or a shared slab, and viewed or
// copied back out) and moving their bytes through the kernel (the framed
// transport's socket reads and writes, actors/net). Counted process-wide on
// the calling thread's CPU clock, so that a bench can tell what a message
// costs the host's cores apart from the computations (apps/bench's step
// split). Messages between actors of one process cross nothing and cost
// nothing here.

#include <cstdint>

namespace baton::messages {

/// CPU seconds this process spent so far on crossing messages.
struct crossing_cpu {
  double serialisation = 0; ///< encoding and decoding, their copies included
  double wire = 0;          ///< the kernel's socket reads and writes
};

/// What this process spent so far (every thread).
crossing_cpu crossing_cpu_so_far();

/// The two counters of crossing_cpu.
enum class crossing_part { serialisation, wire };

/// Adds the calling thread's CPU time during its life to `part`.
class crossing_scope {
public:
  explicit crossing_scope(crossing_part part);
  ~crossing_scope();
  crossing_scope(const crossing_scope&) = delete;
  crossing_scope& operator=(const crossing_scope&) = delete;

private:
  crossing_part part_;
  int64_t since_ns_;
};

} // namespace baton::messages
