// `baton run`'s way, from the request to the finished run: the registry
// read once (modes, schemas, roles); the request's topology (the file, the
// built-in default or with --resume DIR the recorded run) read once and
// parsed once with every mode's schema; the outputs and flags checked; the
// one plan made (thread budgets, placement and fault checks are steps over
// it); the job run by the runtime, the mode's reference or its baseline;
// its outputs written (write_outputs, run_outputs.cpp).
#include "actors/modes/run.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/config/default_topology.hpp"
#include "actors/config/topology_file.hpp"
#include "actors/modes/pretraining.hpp"
#include "actors/modes/registry.hpp"
#include "actors/modes/run_outputs.hpp"
#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_run.hpp"
#include "actors/runtime/plan_checks.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

caf::expected<topology> load_topology_of(const run_request& r,
                                         const std::vector<job_schema>& jobs);

/// The built-in default keeps its checkpoint where configs/transfer.yaml does.
std::vector<std::string> with_default_checkpoint(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"backbone.checkpoint=" BATON_SOURCE_DIR
                               "/build/checkpoints/convnet-pretrained.pt"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

/// `text` parsed as the topology file `file` with `overrides`; an empty
/// `file` is the built-in default's text, with its checkpoint.
caf::expected<topology> parse_text(const std::string& text, const std::string& file,
                                   const std::vector<std::string>& overrides,
                                   const std::vector<job_schema>& jobs) {
  if (file.empty())
    return parse_topology(text, default_topology_name, with_default_checkpoint(overrides), jobs);
  return parse_topology_as(text, file, overrides, jobs);
}

/// The text of the request's topology file, or the built-in default's: read
/// here once, then parsed from this text.
caf::expected<std::string> request_text(const run_request& r) {
  if (r.topology_path.empty())
    return std::string{default_topology_yaml};
  if (!r.topology_text.empty())
    return r.topology_text;
  return read_topology_file(r.topology_path);
}

/// `--resume DIR`: the recorded run's topology and options (request_record);
/// its training settings must be those of the recorded run.
caf::expected<topology> load_resumed_topology(const run_request& r,
                                              const std::vector<job_schema>& jobs) {
  // Refused before anything is written there: a directory that holds no run
  // became one (its run.yaml and run.lock) and then refused the right one.
  std::error_code ec;
  if (!std::filesystem::is_directory(r.resume_dir, ec))
    return make_error(errc::bad_config,
                      "--resume " + r.resume_dir +
                        (std::filesystem::exists(r.resume_dir, ec)
                           ? ": not a directory (name the checkpoint directory of a run)"
                           : ": no such directory (name the checkpoint directory of a run)"));
  if (!has_run_record(r.resume_dir) && !holds_checkpoints(r.resume_dir))
    return make_error(errc::bad_config,
                      "--resume " + r.resume_dir + ": holds no run to continue (no " +
                        run_record_path(r.resume_dir) +
                        " and no checkpoints ACTOR/step-N.ckpt): name the directory a failed "
                        "run gave, or runtime.checkpoint_dir's");
  if (!has_run_record(r.resume_dir)) {
    spdlog::warn("--resume {}: no {} (checkpoints of an older baton): the topology and --set "
                 "options must be those of the run that wrote them",
                 r.resume_dir, run_record_path(r.resume_dir));
    run_request as_given = r;
    as_given.resume_dir.clear();
    return load_topology_of(as_given, jobs);
  }
  auto then = read_run_record(r.resume_dir);
  auto text = request_text(r);
  if (!text)
    return text.error();
  auto now = request_record(r, *text);
  if (!then)
    return then.error();
  if (!now)
    return now.error();
  auto name = [](const run_record& x) {
    return x.topology_file.empty() ? std::string{default_topology_name} : x.topology_file;
  };
  auto then_values = topology_values(then->topology_text, name(*then), then->overrides, jobs);
  if (!then_values)
    return then_values.error();
  auto now_values = topology_values(now->topology_text, name(*now), now->overrides, jobs);
  if (!now_values)
    return now_values.error();
  auto difference = settings_difference(training_settings(*then_values),
                                        training_settings(*now_values));
  if (!difference.empty())
    return make_error(errc::bad_config,
                      "--resume " + r.resume_dir + ": the checkpoints were trained with other "
                      "settings (" + difference + "); a resumed run may change runtime, "
                      "faults, nodes and placement only (the run's settings are in " +
                      run_record_path(r.resume_dir) + ")");
  // The topology the recorded run was started with, its options.
  return parse_text(now->topology_text, now->topology_file, now->overrides, jobs);
}

/// The request's topology parsed with `jobs`, the registry's schemas, from
/// its text (request_text: read once, or the caller's).
caf::expected<topology> load_topology_of(const run_request& r,
                                         const std::vector<job_schema>& jobs) {
  if (!r.resume_dir.empty())
    return load_resumed_topology(r, jobs);
  auto text = request_text(r);
  if (!text)
    return text.error();
  return parse_text(*text, r.topology_path, r.overrides, jobs);
}

} // namespace

caf::expected<topology> load_request_topology(const run_request& r) {
  return load_topology_of(r, registry().schemas);
}

namespace {

/// The jobs (`job:` values) whose mode has `feature`, for an error.
template <class Has>
std::string jobs_with(Has feature) {
  std::string out;
  for (const auto& m : all_modes())
    if (feature(m))
      out += (out.empty() ? "job: " : ", ") + m.name();
  return out.empty() ? "none" : out;
}

/// The request's flags that `job` does not offer, refused before anything
/// runs.
caf::error check_flags(const run_request& r, const mode& job) {
  if (!r.mode.empty() && r.mode != "local")
    return make_error(errc::bad_config, "--mode " + r.mode + ": only 'local' is known");
  if (!r.baseline.empty() && r.baseline != "separate")
    return make_error(errc::bad_config, "--baseline " + r.baseline + ": only 'separate' is known");
  // Flags of one kind of run given to another were ignored, the run not the one asked for.
  if (r.mode.empty() && r.threads > 0)
    return make_error(errc::bad_config,
                      "--threads sets the torch threads of --mode local; an actor run's are "
                      "runtime.compute_threads (--set runtime.compute_threads=N)");
  if (!r.only_head.empty() && (r.mode.empty() || !job.separate_baseline))
    return make_error(errc::bad_config,
                      "--only-head trains one head with --mode local, in " +
                        jobs_with([](const auto& m) { return m.separate_baseline; }) +
                        " (the jobs with heads)" +
                        (r.mode.empty() ? std::string{} : ", not job: " + job.name()));
  // (--mode local takes it: a pipeline's reference plans its stages for those nodes.)
  if (r.local_nodes > 0 && !r.baseline.empty())
    return make_error(errc::bad_config,
                      "--local-nodes runs the actors over node processes; --baseline separate "
                      "runs each head in a process of its own, without nodes");
  if (!r.trace_out.empty() && (!job.traces || !r.mode.empty()))
    return make_error(errc::bad_config,
                      "--trace records the actors of a run (not --mode local) of " +
                        jobs_with([](const auto& m) { return m.traces; }) + ", not job: " +
                        job.name());
  if (!r.save_model.empty() && job.save_model == nullptr)
    return make_error(errc::bad_config,
                      "--save-model saves the model of " +
                        jobs_with([](const auto& m) { return m.save_model != nullptr; }) +
                        "; job: " + job.name() + " has its results in its metrics");
  if (!r.save_model.empty() && !r.baseline.empty())
    return make_error(errc::bad_config,
                      "--save-model saves the model of one run; --baseline separate trains "
                      "independent processes (save one with --mode local --only-head NAME)");
  if (!r.baseline.empty() && !job.separate_baseline)
    return make_error(errc::bad_config,
                      "--baseline separate applies to " +
                        jobs_with([](const auto& m) { return m.separate_baseline; }) +
                        ", not job: " + job.name());
  return caf::none;
}

} // namespace

caf::expected<job_plan> plan_of(const mode& job, const topology& t) {
  // Made once: the budgets the topology leaves unset are a step over it,
  // not a plan of their own.
  auto plan = job.plan(t, plan_use::run);
  if (!plan)
    return plan;
  // The runtime's steps over it (placement, thread budgets, fault checks).
  if (auto err = settle_plan(*plan, t))
    return err;
  return plan;
}

namespace {

/// What the runtime runs of `t` with `r`'s actors: the plan, made once on
/// the cluster's nodes by name (with `--local-nodes N`, n1..nN, before they
/// run), the cluster, what the runtime reads of the workload, the roles.
caf::expected<actor_job> actor_job_of(const mode& job, const topology& t, const run_request& r,
                                      const std::vector<role_type>& roles) {
  // Node names are known before the nodes run: run_actors starts n1..nN
  // and learns their addresses.
  auto placed = r.local_nodes > 0 ? with_local_nodes(t, r.local_nodes) : t;
  if (!r.link.empty())
    placed.link_bandwidth = link_bytes_per_second(r.link); // the planner's
  auto plan = plan_of(job, placed);
  if (!plan)
    return plan.error();
  return actor_job{std::move(*plan), placed, facts_of(placed), roles, t.text};
}

} // namespace

caf::expected<job_result> run_job(const run_request& r) {
  const mode_registry& modes = registry();
  auto t = load_topology_of(r, modes.schemas);
  if (!t)
    return t.error();
  const auto* mode = modes.find(t->job);
  if (mode == nullptr)
    return make_error(errc::bad_config, t->file + ": no training mode '" + t->job + "'");
  if (auto err = check_outputs(r, *t))
    return err;
  if (auto err = check_flags(r, *mode))
    return err;
  // An actor run's plan, made once (its thread budgets with it), its faults
  // checked, before anything is prepared.
  std::optional<actor_job> job;
  if (r.mode.empty() && r.baseline.empty()) {
    auto made = actor_job_of(*mode, *t, r, modes.roles);
    if (!made)
      return made.error();
    job = std::move(*made);
  } else {
    derive_thread_budgets(*t); // the one process's torch threads
  }
  if (mode->starts_pretrained)
    if (auto ok = ensure_pretrained(*t); !ok)
      return ok.error();
  // Without actors: the mode's reference, or its baseline (the request says which).
  auto result = job ? run_actors(std::move(*job), r) : mode->local(*t, r);
  if (!result)
    return result.error();
  if (auto err = write_outputs(r, *t, *mode, *result))
    return err;
  return result;
}

caf::error pretrain(const run_request& r) {
  auto t = load_request_topology(r);
  if (!t)
    return t.error();
  if (t->checkpoint.empty())
    return make_error(errc::bad_config,
                      t->file + ": backbone.checkpoint is none: there is no file to pre-train "
                                "(name one, e.g. --set backbone.checkpoint=convnet.pt)");
  if (auto ok = pretrain_backbone(*t); !ok)
    return ok.error();
  return caf::none;
}

} // namespace modes
} // namespace baton::actors
