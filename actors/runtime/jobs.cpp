#include "actors/runtime/jobs.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/topology_file.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/net/system.hpp"
#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/coordinator.hpp"

#include "actors/runtime/local_cluster.hpp"
#include "actors/runtime/spawner.hpp"
#include "messages/errc.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

namespace fs = std::filesystem;

/// The coordinator's process and its local nodes: CAF never closes a silent
/// connection (0); the coordinator's node watch judges silence, with
/// runtime.connection_timeout_ms (actors/runtime/node_watch.hpp). A local
/// node ends with its coordinator (child_process: PR_SET_PDEATHSIG).
system_settings settings_of(const cluster& c) {
  return {c.runtime.scheduler_threads, c.runtime.heartbeat_interval,
          std::chrono::milliseconds{0}, c.runtime.shared_memory, c.runtime.tls};
}

// -- the actor run: embedded, on listed nodes, or on local nodes --------------

/// The parsed `--link` of `r` (nothing without one).
caf::expected<std::optional<link_spec>> link_of(const run_request& r) {
  if (r.link.empty())
    return std::optional<link_spec>{};
  if (r.local_nodes < 1)
    return make_error(errc::bad_config, "--link " + r.link + " needs --local-nodes N: it shapes "
                                        "the links of the local node processes");
  std::string error;
  auto spec = parse_link_spec(r.link, error);
  if (!spec)
    return make_error(errc::bad_config, "--link " + error);
  return spec;
}

/// What the coordinator takes from the request and the mode.
run_options options_of(const run_request& r, const run_record& record, const actor_job& job) {
  run_options options;
  options.progress_tty = r.progress_tty;
  options.interrupted = r.interrupted;
  options.trace = !r.trace_out.empty();
  options.epoch_weights = !r.save_model.empty() && job.facts.selection.keep_best;
  options.resume_dir = r.resume_dir;
  options.record = record;
  options.roles = job.roles;
  return options;
}

/// The checkpoint directory of a run, claimed before anything starts:
/// --resume's, runtime.checkpoint_dir, or (checkpoints on, none named) a
/// temporary one of the run's, removed after a successful run only.
class run_checkpoints {
public:
  caf::error claim(const runtime_spec& limits, const run_request& r,
                   const run_record& record) {
    bool resuming = !r.resume_dir.empty();
    if (limits.checkpoint_every == 0 && !resuming)
      return caf::none;
    if (auto err = check_record_size(record))
      return err;
    dir_ = resuming ? r.resume_dir : limits.checkpoint_dir;
    if (dir_.empty()) {
      auto made = make_work_directory("baton-checkpoints");
      if (!made)
        return made.error();
      temporary_.emplace(*made);
      dir_ = *made;
    }
    auto lock = claim_checkpoint_dir(dir_, record, resuming);
    if (!lock)
      return lock.error();
    lock_.emplace(std::move(*lock));
    return caf::none;
  }

  /// The temporary directory ("" none).
  std::string temporary() const { return temporary_ ? temporary_->path() : std::string{}; }

  /// `failure` of a run of `trainable` actors, saying where its checkpoints
  /// are kept and how to resume when they hold a step to resume from. The
  /// temporary directory is kept then: a failed run never deletes what its
  /// --resume needs.
  caf::error failed(caf::error failure, const std::vector<std::string>& trainable) {
    if (dir_.empty() || trainable.empty() || failure.category() != error_category_atom ||
        common_checkpoint_steps(dir_, trainable).front() == 0)
      return failure;
    if (temporary_)
      temporary_->keep();
    return make_error(static_cast<errc>(failure.code()),
                      context_of(failure) + "; its checkpoints are kept in " + dir_ +
                        ": continue the run with `baton run --resume " + dir_ + "`");
  }

private:
  std::string dir_;
  std::optional<owned_directory> temporary_;
  std::optional<checkpoint_lock> lock_; ///< released last: after the nodes stopped
};

/// Sets the outputs of `record` to those `r` asks for (absolute paths).
void record_outputs(const run_request& r, run_record& record) {
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    return path.empty() ? path : fs::absolute(path, ec).lexically_normal().string();
  };
  record.metrics_file = absolute(r.metrics_out);
  record.curves_file = absolute(r.curves);
  record.trace_file = absolute(r.trace_out);
  record.model_file = absolute(r.save_model);
}

} // namespace

caf::expected<job_result> run_actors(actor_job job, const run_request& r) {
  auto record = request_record(r, job.topology_text);
  if (!record)
    return record.error();
  auto link = link_of(r);
  if (!link)
    return link.error();
  // Claimed before anything starts, held until the nodes have stopped (a
  // node of a failed run may still be writing a checkpoint).
  run_checkpoints checkpoints;
  if (auto err = checkpoints.claim(job.where.runtime, r, *record))
    return err;
  std::optional<local_cluster> nodes;
  std::optional<owned_directory> logs;
  if (r.local_nodes > 0) {
    auto dir = make_work_directory("baton-nodes");
    if (!dir)
      return dir.error();
    logs.emplace(*dir);
    auto started = local_cluster::start(r.local_nodes, settings_of(job.where), *dir, *link);
    if (!started)
      return started.error();
    nodes = std::move(*started);
    job.where = nodes->place(std::move(job.where));
    spdlog::info("started {} local nodes (logs in {}, removed after a successful run)",
                 r.local_nodes, *dir);
  }
  caf::actor_system_config cfg;
  configure(cfg, settings_of(job.where));
  caf::actor_system sys{cfg};
  install_framed_transport(sys);
  run_options options = options_of(r, *record, job);
  options.temporary_checkpoint_dir = checkpoints.temporary();
  auto result = run_actor_job(sys, job.where, job.facts, job.plan, options);
  if (nodes)
    nodes->stop();
  if (result)
    return result;
  if (logs) {
    logs->keep();
    spdlog::info("the local nodes' logs are kept in {}", logs->path());
  }
  return checkpoints.failed(std::move(result.error()), job.plan.trainable_names());
}

void record_finished(const run_request& r, const job_result& result) {
  const auto& dir = result.checkpoint_dir;
  if (dir.empty() || !has_run_record(dir))
    return;
  auto record = read_run_record(dir);
  if (!record) {
    spdlog::warn("cannot record that the run finished: {}", describe(record.error()));
    return;
  }
  auto actors = record->actors.empty() ? checkpointed_actors(dir) : record->actors;
  record->finished_step = common_checkpoint_steps(dir, actors).front();
  record_outputs(r, *record);
  if (auto err = write_run_record(dir, *record))
    spdlog::warn("cannot record that the run finished: {}", describe(err));
}

caf::expected<std::string> fault_override(const std::string& text) {
  std::string entries;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size())
      return make_error(errc::bad_config,
                        "--fault " + text + ": expected key=value,... (for example "
                        "kind=kill_node,node=n2,at_step=10)");
    entries += (entries.empty() ? "" : ", ") + item.substr(0, equals) + ": " +
               item.substr(equals + 1);
  }
  return "faults.+={" + entries + "}";
}

caf::expected<run_record> request_record(const run_request& r, const std::string& text) {
  caf::expected<run_record> record = make_run_record(r.topology_path, text, r.overrides);
  record_outputs(r, *record);
  if (r.resume_dir.empty() || !has_run_record(r.resume_dir))
    return record;
  auto then = read_run_record(r.resume_dir);
  if (!then)
    return then.error();
  // A resumed run continues its own checkpoints (a record of an older baton has no id).
  if (!then->run_id.empty())
    record->run_id = then->run_id;
  if (r.topology_path.empty()) {
    record->topology_file = then->topology_file;
    record->topology_text = then->topology_text;
  }
  record->overrides.insert(record->overrides.begin(), then->overrides.begin(),
                           then->overrides.end());
  return record;
}

caf::error with_recorded_outputs(run_request& r) {
  if (r.resume_dir.empty() || !has_run_record(r.resume_dir))
    return caf::none;
  auto then = read_run_record(r.resume_dir);
  if (!then)
    return then.error();
  std::string taken;
  for (auto [given, recorded, flag] :
       {std::tuple{&r.metrics_out, &then->metrics_file, "--metrics-out"},
        std::tuple{&r.curves, &then->curves_file, "--curves"},
        std::tuple{&r.trace_out, &then->trace_file, "--trace"},
        std::tuple{&r.save_model, &then->model_file, "--save-model"}}) {
    if (!given->empty() || recorded->empty())
      continue;
    *given = *recorded;
    taken += (taken.empty() ? "" : ", ") + std::string{flag} + " " + *recorded;
  }
  if (!taken.empty())
    spdlog::info("--resume {}: writes the outputs of the run as it was started: {} (a flag "
                 "given with --resume replaces one)",
                 r.resume_dir, taken);
  return caf::none;
}

} // namespace runtime
} // namespace baton::actors
