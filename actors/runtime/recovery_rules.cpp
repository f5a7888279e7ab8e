#include "actors/runtime/recovery_rules.hpp"

#include <optional>
#include <string>


namespace baton::actors {
inline namespace runtime {

errc failure_code(uint8_t code) {
  bool known = code > static_cast<uint8_t>(errc::none) &&
               code <= static_cast<uint8_t>(errc::interrupted);
  return known ? static_cast<errc>(code) : errc::actor_failed;
}

std::string no_recovery_hint(const runtime_spec& runtime) {
  if (runtime.max_restarts == 0)
    return "no recovery: runtime.max_restarts is 0 (set it above 0 to restart from the "
           "newest checkpoint)";
  return "no recovery: the run writes no checkpoints to restart from "
         "(runtime.checkpoint_every is 0); to survive a lost node, checkpoint every N steps "
         "with runtime.checkpoint_every: N (e.g. --set runtime.checkpoint_every=50): the job "
         "then restarts from its newest checkpoint on the surviving nodes";
}

caf::error recurring_failure(const caf::error& failure, const std::string& target,
                             int64_t step, fault_injector& faults) {
  if (!faults.recurs(target, failure.code(), step))
    return caf::none;
  bool ours = failure.category() == error_category_atom;
  return make_error(ours ? static_cast<errc>(failure.code()) : errc::actor_failed,
                    (ours ? context_of(failure) : describe(failure)) + " (it recurred at step " +
                      std::to_string(step) +
                      " after a restart, with no fault injected: not retried, a restart would "
                      "meet it again)");
}

void measure_detection(fault_record& f, const liveness& live,
                       std::chrono::steady_clock::time_point detected) {
  if (f.detected_after_ms >= 0)
    return;
  std::optional<std::chrono::steady_clock::time_point> since;
  if (f.kind == "node_lost")
    since = live.last_heard_from(f.target);
  else if (f.kind == "stalled")
    since = live.last_advanced();
  if (since)
    f.detected_after_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(detected - *since).count();
}

} // namespace runtime
} // namespace baton::actors
