#include "actors/flow/activity.hpp"

#include <utility>

namespace baton::actors {
inline namespace flow {

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
  if (auto crossing = work.crossing_cpu_since_begin();
      crossing.serialisation > 0 || crossing.wire > 0)
    r.figures.insert(r.figures.end(), {{"serialisation_cpu_seconds", crossing.serialisation},
                                       {"wire_cpu_seconds", crossing.wire}});
  return r;
}

} // namespace flow
} // namespace baton::actors
