#include "actors/runtime/checkpoints.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include <spdlog/spdlog.h>

#include "actors/config/names.hpp"
#include "actors/config/yaml_field.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/error.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::actors {
inline namespace runtime {

namespace fs = std::filesystem;

namespace {

/// Who holds the lock file open as `fd`, as its holder wrote it ("pid P
/// host H run ID"), or a placeholder while it has not written it yet.
std::string holder_of(int fd) {
  char text[512] = {};
  auto n = ::pread(fd, text, sizeof text - 1, 0);
  std::string line{text, static_cast<size_t>(std::max<ssize_t>(n, 0))};
  line = line.substr(0, line.find('\n'));
  return line.empty() ? std::string{"a process that has not written its pid yet"} : line;
}

/// "pid P host H run ID": what a holder writes into the lock file.
std::string holder_line(const std::string& run_id) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "pid " + std::to_string(::getpid()) + " host " + host + " run " + run_id + "\n";
}

/// Whether `name` is the name of a checkpoint file (step-N.ckpt).
bool is_checkpoint_file(const std::string& name) {
  auto suffix = std::string{".ckpt"};
  return name.rfind("step-", 0) == 0 && name.size() > suffix.size() + 5 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The checkpoint files in the subdirectories of `dir`.
std::vector<fs::path> checkpoint_files(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    std::error_code sub_ec;
    if (!sub.is_directory(sub_ec))
      continue;
    for (const auto& f : fs::directory_iterator(sub.path(), sub_ec))
      if (is_checkpoint_file(f.path().filename().string()))
        out.push_back(f.path());
  }
  return out;
}

/// "metrics in M; model in F" of a finished run, or what it did not write.
std::string outputs_of(const run_record& r) {
  return (r.metrics_file.empty() ? std::string{"no --metrics-out"} : "metrics in " + r.metrics_file) +
         "; " + (r.model_file.empty() ? std::string{"no --save-model"} : "model in " + r.model_file);
}

/// --resume DIR: a finished run has nothing to resume.
caf::error refuse_finished(const std::string& dir, const run_record& then) {
  return make_error(errc::bad_config,
                    "--resume " + dir + ": run " + then.run_id + " finished (its newest checkpoint "
                      "is of step " + std::to_string(then.finished_step) + "; " +
                      outputs_of(then) + "): there is nothing to resume; a new run with runtime.checkpoint_dir " +
                      dir + " starts afresh and replaces its checkpoints");
}

/// The checkpoints of the finished run `then` in `dir`: in the directories
/// it made (its actors; for the record of a baton before they were
/// recorded, those holding checkpoints), not through a link, and carrying
/// its run id. Whatever else is there is not baton's to delete: a user's
/// `DIR/old/step-1.ckpt` was once removed with the run's.
std::vector<fs::path> checkpoints_of_run(const std::string& dir, const run_record& then) {
  auto folders = then.actors.empty() ? checkpointed_actors(dir) : then.actors;
  std::vector<fs::path> out;
  for (const auto& a : folders) {
    std::error_code ec;
    auto folder = checkpoint_dir_of(dir, a);
    if (!check_name(a).empty() || fs::is_symlink(fs::symlink_status(folder, ec)))
      continue; // a record that names a path, or a folder baton did not make
    model::checkpoint_store store{folder};
    for (auto step : store.valid_steps()) {
      try {
        if (store.load(step).run_id == then.run_id)
          out.emplace_back(store.path_of(step));
      } catch (const model::error&) {
        // Not one of its checkpoints: kept.
      }
    }
  }
  return out;
}

/// A new run in `dir`, which holds `files` of another run: that run's
/// removed when it finished (checkpoints_of_run), refused otherwise (it can
/// still be resumed).
caf::error take_over(const std::string& dir, const std::vector<fs::path>& files) {
  auto then = read_run_record(dir);
  if (then && then->finished_step >= 0) {
    auto own = checkpoints_of_run(dir, *then);
    std::error_code ec;
    for (const auto& f : own)
      fs::remove(f, ec);
    spdlog::info("{}: removed {} checkpoints of run {}, which finished (step {}){}", dir,
                 own.size(), then->run_id, then->finished_step,
                 files.size() > own.size()
                   ? "; kept " + std::to_string(files.size() - own.size()) +
                       " step-*.ckpt files that are not its own"
                   : std::string{});
    return caf::none;
  }
  auto who = then ? "run " + (then->run_id.empty() ? std::string{"(no id)"} : then->run_id) +
                      ", which did not finish"
                  : std::string{"a run without a readable "} + run_record_path(dir);
  return make_error(errc::bad_config,
                    "runtime.checkpoint_dir " + dir + " holds the checkpoints of " + who + " (" +
                      files.front().string() + "): continue that run with `baton run --resume " +
                      dir + "`, or remove its checkpoints, or choose another "
                      "runtime.checkpoint_dir; a new run never trains on another run's state");
}

} // namespace

std::string lock_path(const std::string& dir) {
  return (fs::path(dir) / "run.lock").string();
}

caf::expected<checkpoint_lock> checkpoint_lock::take(const std::string& dir,
                                                     const std::string& run_id) {
  auto path = lock_path(dir);
  // Never through a link: another user who may write in DIR could point
  // run.lock at a file of ours, which the holder line would overwrite.
  std::string why;
  int fd = model::open_for_writing(path, O_RDWR | O_CREAT, 0644, why);
  if (fd < 0)
    return make_error(errc::bad_config, "cannot take the lock file " + path + " of checkpoint "
                                          "directory " + dir + ": " + why);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    auto reason = errno;
    auto holder = holder_of(fd);
    ::close(fd);
    if (reason != EWOULDBLOCK)
      return make_error(errc::bad_config, "cannot lock " + path + " (" +
                                            std::strerror(reason) + ")");
    return make_error(errc::bad_config,
                      "checkpoint directory " + dir + " is in use by a live run (" + holder +
                        ", which holds " + path + "): two runs never share "
                        "a checkpoint directory; wait for that run to end, or choose another "
                        "runtime.checkpoint_dir");
  }
  auto line = holder_line(run_id);
  // Who holds it is for the message above only: a failed write leaves the
  // lock in force.
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, line.data(), line.size(), 0) < 0)
    spdlog::warn("{}: cannot write the holder ({})", path, std::strerror(errno));
  return checkpoint_lock{fd};
}

checkpoint_lock::checkpoint_lock(checkpoint_lock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

checkpoint_lock& checkpoint_lock::operator=(checkpoint_lock&& other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

checkpoint_lock::~checkpoint_lock() {
  if (fd_ >= 0)
    ::close(fd_); // releases the flock
}

caf::expected<checkpoint_lock> claim_checkpoint_dir(const std::string& dir,
                                                    const run_record& record, bool resuming) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(errc::bad_config,
                      "cannot create the checkpoint directory " + dir + " (" + ec.message() + ")");
  auto lock = checkpoint_lock::take(dir, record.run_id);
  if (!lock)
    return lock.error();
  if (resuming) {
    if (auto then = read_run_record(dir); then && then->finished_step >= 0)
      return refuse_finished(dir, *then);
  } else if (auto files = checkpoint_files(dir); !files.empty()) {
    if (auto err = take_over(dir, files))
      return err;
  }
  return lock;
}

std::vector<std::string> checkpointed_actors(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& f : checkpoint_files(dir))
    names.insert(f.parent_path().filename().string());
  return {names.begin(), names.end()};
}

caf::expected<int64_t> newest_own_step(const checkpoint_choice& choice,
                                       const std::vector<std::string>& trainable) {
  if (choice.dir.empty())
    return int64_t{0};
  auto step = common_checkpoint_steps(choice.dir, trainable).front();
  if (step == 0)
    return step;
  for (const auto& a : trainable) {
    model::checkpoint_store store{checkpoint_dir_of(choice.dir, a)};
    try {
      auto why = foreign_checkpoint(store.path_of(step), store.load(step).run_id, choice.run_id);
      if (!why.empty())
        return make_error(errc::bad_file, why);
    } catch (const model::error& e) {
      return make_error(errc::bad_file, e.what());
    }
  }
  return step;
}

caf::expected<checkpoint_choice> choose_checkpoints(const runtime_spec& limits,
                                                    const job_plan& plan,
                                                    const run_options& options) {
  checkpoint_choice choice;
  choice.every = limits.checkpoint_every;
  choice.dir = options.resume_dir.empty() ? limits.checkpoint_dir : options.resume_dir;
  auto record = options.record;
  if (record.run_id.empty())
    record.run_id = new_run_id();
  record.actors = plan.trainable_names();
  choice.run_id = record.run_id;
  if (limits.checkpoint_every == 0 && options.resume_dir.empty())
    return choice;
  if (choice.dir.empty())
    choice.dir = options.temporary_checkpoint_dir;
  if (choice.dir.empty())
    return make_error(errc::bad_config, "runtime.checkpoint_every is " +
                                          std::to_string(limits.checkpoint_every) +
                                          " but no checkpoint directory is set");
  choice.kept = true;
  // A resumed run finds its step before it writes anything: a refused
  // --resume leaves the directory as it was.
  if (!options.resume_dir.empty()) {
    auto step = newest_own_step(choice, plan.trainable_names());
    if (!step)
      return step.error();
    choice.restore_step = *step;
    if (choice.restore_step == 0)
      return make_error(errc::bad_file, "--resume " + choice.dir +
                                          ": no step of which every trainable actor (" +
                                          detail::join(plan.trainable_names()) +
                                          ") has a valid checkpoint");
  }
  std::error_code ec;
  std::filesystem::create_directories(choice.dir, ec);
  if (auto err = write_run_record(choice.dir, record))
    return err;
  if (!options.resume_dir.empty()) {
    spdlog::info("resuming run {} from step {} (checkpoints in {})", choice.run_id,
                 choice.restore_step, choice.dir);
  } else {
    spdlog::info("checkpoints of run {} every {} steps in {}{}", choice.run_id,
                 limits.checkpoint_every, choice.dir,
                 choice.dir == options.temporary_checkpoint_dir
                   ? " (removed after a successful run, kept for --resume when it fails; set "
                     "runtime.checkpoint_dir to keep them)"
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
      r.run_id = checkpoints.run_id;
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

bool holds_checkpoints(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    if (!entry.is_directory(ec))
      continue;
    if (!model::checkpoint_store{entry.path().string()}.valid_steps().empty())
      return true;
  }
  return false;
}

std::vector<int64_t> common_checkpoint_steps(const std::string& run_dir,
                                             const std::vector<std::string>& actors) {
  std::optional<std::set<int64_t>> common;
  for (const auto& a : actors) {
    auto steps = model::checkpoint_store{checkpoint_dir_of(run_dir, a)}.valid_steps();
    std::set<int64_t> mine(steps.begin(), steps.end());
    if (!common) {
      common = std::move(mine);
      continue;
    }
    std::set<int64_t> both;
    std::set_intersection(common->begin(), common->end(), mine.begin(), mine.end(),
                          std::inserter(both, both.begin()));
    common = std::move(both);
  }
  std::vector<int64_t> out;
  if (common)
    out.assign(common->rbegin(), common->rend());
  out.push_back(0);
  return out;
}

} // namespace runtime
} // namespace baton::actors
