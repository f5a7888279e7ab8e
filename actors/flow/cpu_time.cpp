#include "actors/flow/cpu_time.hpp"

#include <ctime>

#include <time.h>

namespace baton::actors {
inline namespace flow {

namespace {

double seconds_of(const timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double cpu_clock_seconds(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return seconds_of(t);
}

} // namespace

double thread_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

double process_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

double process_cpu_seconds(pid_t pid) {
  clockid_t clock{};
  timespec t{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &t) != 0)
    return -1;
  return seconds_of(t);
}

} // namespace flow
} // namespace baton::actors
