#include "actors/runtime/fault_sending.hpp"

#include <string>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/flow/protocols.hpp"

namespace baton::actors {
inline namespace runtime {

void send_fault(caf::blocking_actor* self, const fault_spec& f, job_pass& pass,
                const job_nodes& nodes, int64_t step) {
  if (f.kind == "throw") {
    spdlog::warn("chaos: '{}' throws (step {})", f.actor, f.at_step);
    if (const auto* a = pass.find(f.actor))
      self->send(a->handle, fault_atom::value, std::string{"throw (chaos)"});
    return;
  }
  const auto* spawner = nodes.spawner_of(f.node);
  if (spawner == nullptr)
    return;
  spdlog::warn("injecting fault: {} node '{}' (at step {})", f.kind, f.node, step);
  self->send(*spawner, fault_atom::value, std::string{f.kind == "kill_node" ? "kill" : "stop"},
             static_cast<int32_t>(f.stopped.count()));
}

} // namespace runtime
} // namespace baton::actors
