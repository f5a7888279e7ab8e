#include "actors/runtime/checkpoints.hpp"

#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "actors/config/yaml_field.hpp"
#include "actors/roles/recovery.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

caf::expected<checkpoint_choice> choose_checkpoints(const topology& t, const job_plan& plan,
                                                    const run_options& options) {
  checkpoint_choice choice;
  choice.every = t.runtime.checkpoint_every;
  choice.dir = options.resume_dir.empty() ? t.runtime.checkpoint_dir : options.resume_dir;
  if (t.runtime.checkpoint_every == 0 && options.resume_dir.empty())
    return choice;
  if (choice.dir.empty())
    choice.dir = options.temporary_checkpoint_dir;
  if (choice.dir.empty())
    return make_error(errc::bad_config, "runtime.checkpoint_every is " +
                                          std::to_string(t.runtime.checkpoint_every) +
                                          " but no checkpoint directory is set");
  choice.kept = true;
  std::error_code ec;
  std::filesystem::create_directories(choice.dir, ec);
  if (auto err = write_run_record(choice.dir, options.record))
    return err;
  if (!options.resume_dir.empty()) {
    choice.restore_step = common_checkpoint_steps(choice.dir, plan.trainable_names()).front();
    if (choice.restore_step == 0)
      return make_error(errc::bad_file, "--resume " + choice.dir +
                                          ": no step of which every trainable actor (" +
                                          detail::join(plan.trainable_names()) +
                                          ") has a valid checkpoint");
    spdlog::info("resuming from step {} (checkpoints in {})", choice.restore_step, choice.dir);
  } else {
    spdlog::info("checkpoints every {} steps in {}{}", t.runtime.checkpoint_every, choice.dir,
                 choice.dir == options.temporary_checkpoint_dir
                   ? " (removed at the end: set runtime.checkpoint_dir to keep them for --resume)"
                   : "");
  }
  return choice;
}

run_settings run_settings_of(const planned_actor& a, const job_plan& plan,
                             const checkpoint_choice& checkpoints, fault_injector& faults,
                             bool trace) {
  run_settings run;
  if (a.trainable) {
    auto& r = run.recovery;
    if (!checkpoints.dir.empty()) {
      r.checkpoint_dir = checkpoint_dir_of(checkpoints.dir, a.name);
      r.checkpoint_every = checkpoints.every;
    }
    r.throw_at_step = faults.throw_step_for(a.name);
    auto trainable = plan.trainable_names();
    if (!trainable.empty() && a.name == trainable.back())
      r.notify_from_step = faults.notify_from_step();
  }
  run.recovery.restore_step = checkpoints.restore_step;
  run.trace = trace;
  return run;
}

} // namespace runtime
} // namespace baton::actors
