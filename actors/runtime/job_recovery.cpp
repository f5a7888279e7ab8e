#include "actors/runtime/job_recovery.hpp"

#include <utility>

#include "actors/runtime/recovery_rules.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

job_recovery::job_recovery(const cluster& c)
  : runtime_(c.runtime), specs_(c.faults), recovers_(c.recovers()) {}

caf::error job_recovery::prepare(const std::vector<std::string>& live_nodes, bool embedded,
                                 const job_plan& plan, const run_options& options) {
  if (auto why = unknown_fault_node(specs_, live_nodes, embedded))
    return make_error(errc::bad_config, *why);
  faults_ = fault_injector{specs_};
  auto choice = choose_checkpoints(runtime_, plan, options);
  if (!choice)
    return std::move(choice.error());
  checkpoints_ = std::move(*choice);
  return caf::none;
}

caf::error job_recovery::failed(const std::string& kind, const std::string& target,
                                caf::error err) {
  recoverable_ = recovers_;
  failure_kind_ = kind;
  failure_target_ = target;
  return err;
}

caf::error job_recovery::restart_refused(const caf::error& failure, const liveness& live,
                                         int32_t restarts) {
  if (failure_kind_ == "actor_failed" && !faults_.explains(failure_target_)) {
    auto step = live.step_of(failure_target_);
    if (auto err = recurring_failure(failure, failure_target_,
                                     step < 0 ? checkpoints_.restore_step : step, faults_))
      return err;
  }
  if (restarts >= runtime_.max_restarts)
    return make_error(errc::actor_failed, describe(failure) + " (gave up after " +
                                            std::to_string(restarts) +
                                            " restarts: runtime.max_restarts)");
  return caf::none;
}

void job_recovery::restart_from(int64_t step, const liveness& live,
                                clock_type::time_point detected) {
  checkpoints_.restore_step = step;
  open_fault_ = faults_.record_failure(failure_kind_, failure_target_, step, detected);
  measure_detection(*open_fault_, live, detected);
  detected_at_ = detected;
}

std::optional<fault_record> job_recovery::resumed(clock_type::time_point now) {
  if (!open_fault_)
    return std::nullopt;
  auto record = std::move(*open_fault_);
  open_fault_.reset();
  record.recovered_after_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(now - detected_at_).count();
  return record;
}

std::vector<std::string> job_recovery::unreachable_faults(int64_t samples, int32_t epochs,
                                                          int64_t batch_size) {
  if (length_checked_)
    return {};
  length_checked_ = true;
  return unreachable_fault_warnings(specs_, samples, epochs, batch_size);
}

} // namespace runtime
} // namespace baton::actors
