#include "messages/crossing_cpu.hpp"

#include <atomic>
#include <cstdint>

#include <time.h>

namespace baton::messages {

namespace {

/// Nanoseconds of each crossing_part, process-wide.
std::atomic<int64_t> serialisation_ns{0};
std::atomic<int64_t> wire_ns{0};

std::atomic<int64_t>& counter_of(crossing_part part) {
  return part == crossing_part::serialisation ? serialisation_ns : wire_ns;
}

int64_t thread_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

double seconds_of(const std::atomic<int64_t>& ns) {
  return static_cast<double>(ns.load(std::memory_order_relaxed)) * 1e-9;
}

} // namespace

crossing_cpu crossing_cpu_so_far() {
  return {seconds_of(serialisation_ns), seconds_of(wire_ns)};
}

crossing_scope::crossing_scope(crossing_part part) : part_(part), since_ns_(thread_cpu_ns()) {}

crossing_scope::~crossing_scope() {
  counter_of(part_).fetch_add(thread_cpu_ns() - since_ns_, std::memory_order_relaxed);
}

} // namespace baton::messages
