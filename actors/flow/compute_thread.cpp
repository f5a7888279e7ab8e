#include "actors/flow/compute_thread.hpp"

#include <ATen/Parallel.h>

namespace baton::actors {
inline namespace flow {

void use_thread_budget(int32_t threads) {
  thread_local int32_t current = 0;
  if (current != threads) {
    at::set_num_threads(threads);
    current = threads;
  }
}

} // namespace flow
} // namespace baton::actors
