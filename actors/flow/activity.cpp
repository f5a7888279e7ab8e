#include "actors/flow/activity.hpp"

#include <ctime>

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

messages::actor_report activity_report(std::string actor, std::string role, std::string node,
                                       const activity& work) {
  messages::actor_report r;
  r.actor = std::move(actor);
  r.role = std::move(role);
  r.node = std::move(node);
  r.busy_seconds = work.busy_seconds();
  r.idle_seconds = work.idle_seconds();
  r.compute_cpu_seconds = work.compute_cpu_seconds();
  r.process_cpu_seconds = work.process_cpu_seconds_since_begin();
  return r;
}

} // namespace flow
} // namespace baton::actors
