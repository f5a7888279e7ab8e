// The heap every baton process runs on, tuned before anything else runs:
// linked into the `baton` executable and every test executable (an object
// library: its `.preinit_array` entry is only kept where the object is
// linked whole).

#include <malloc.h>

#include <limits>
#include <string_view>

namespace {

/// glibc serves large blocks with mmap and gives them back on free: every
/// step's gradients, buckets and new weights were fresh pages, zeroed by the
/// kernel and faulted in. No block is mmapped now, and up to 2 GiB of free
/// heap is kept for reuse. Measured with `baton bench data-parallel --quick
/// --side ring-serial` (the 20 M-parameter mlp): the one-process loop 367 ->
/// 599 samples/s, the ring over 2 node processes 324 -> 514 (its optimizer
/// step 48 -> 25 ms). The MALLOC_*_ environment variables (MALLOC_ARENA_MAX,
/// MALLOC_MMAP_MAX_, ...) still win.
///
/// glibc gives threads arenas of their own (up to 8 a core). A thread's
/// arena cannot hold a block over 64 MiB (it mmaps it, whatever M_MMAP_MAX
/// says), so until 2026-12-04 every thread shared the main arena, and the
/// threads of one process that computed side by side waited on its lock
/// (two lanes of `--mode local --threads 2` on a small CNN: 25-32% slower).
/// Tensors that large are now the tensor heap's (model/core/tensor_heap.hpp):
/// mapped once and kept for reuse.
///
/// The heap is not put in transparent huge pages (MADV_HUGEPAGE on its
/// first GiB, until 2026-12-02): on this virtual machine a huge page's first
/// touch cost ~25 ms of system time (the kernel zeroes 2 MiB that the host
/// must back), against ~5 us for a 4 KiB page that the guest reuses.
/// `baton run configs/data-parallel.yaml --set data.train_limit=8192
/// --local-nodes 2`: 35-36 s with huge pages (7.6-8.6 s of system time),
/// 30-31 s without (1.7 s); a ResIST `--mode local` run 11 -> 7 s (120 huge
/// page faults, 3.1 s of system time). An earlier measurement on this kind
/// of machine had found them faster (686-738 -> 856-958 samples/s).
///
/// It runs before any library is initialised (the executable's
/// .preinit_array), so that LibTorch's static registrations fill the tuned
/// heap too: `baton --version` took 0.70 s of CPU, 0.52 s so (`perf stat -r
/// 15 baton --version`), and every node process and test run starts that
/// much sooner; the test executables train on it as baton does. libc is not
/// initialised yet either: the environment is read from `envp` (getenv
/// answers nothing here).
void tune_allocator(int, char**, char** envp) {
  auto has = [envp](std::string_view name) {
    for (char** e = envp; e != nullptr && *e != nullptr; ++e)
      if (std::string_view{*e}.substr(0, name.size()) == name)
        return true;
    return false;
  };
  if (!has("MALLOC_MMAP_MAX_="))
    mallopt(M_MMAP_MAX, 0);
  if (!has("MALLOC_TRIM_THRESHOLD_="))
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  if (!has("MALLOC_TOP_PAD_="))
    mallopt(M_TOP_PAD, 64 << 20);
}

} // namespace

__attribute__((section(".preinit_array"), used)) void (*const baton_tune_allocator)(
  int, char**, char**) = tune_allocator;
