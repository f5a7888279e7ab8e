#include "actors/modes/run.hpp"

#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/flow/trace.hpp"
#include "actors/modes/pretraining.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/curves.hpp"
#include "actors/runtime/emulated_hosts.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/run_outputs.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/dataset.hpp"

namespace baton::actors {
inline namespace modes {

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
  if (!r.baseline.empty() && job.run_separate == nullptr)
    return make_error(errc::bad_config,
                      "--baseline separate applies to " +
                        jobs_with([](const auto& m) { return m.run_separate != nullptr; }) +
                        ", not job: " + job.name());
  return caf::none;
}

} // namespace

namespace {

/// What the runtime runs of `t` with `r`'s actors: the plan, made once on
/// the cluster's nodes by name (with `--local-nodes N`, n1..nN, before they
/// run), the cluster, what the runtime reads of the workload, the roles.
caf::expected<actor_job> actor_job_of(const mode& job, const topology& t, const run_request& r) {
  // Node names are known before the nodes run: run_actors starts n1..nN
  // and learns their addresses.
  auto placed = r.local_nodes > 0 ? with_local_nodes(t, r.local_nodes) : t;
  placed.link_bandwidth = link_bytes_per_second(r.link); // the planner's, with --link
  auto plan = plan_of(job, placed);
  if (!plan)
    return plan.error();
  return actor_job{std::move(*plan), placed, facts_of(placed), all_roles(), t.text};
}

} // namespace

caf::expected<finished_run> run_job(const run_request& r) {
  auto t = load_request_topology(r);
  if (!t)
    return t.error();
  const auto* mode = find_mode(t->job);
  if (mode == nullptr)
    return make_error(errc::bad_config, t->file + ": no training mode '" + t->job + "'");
  auto outputs = std::vector<output_file>{{"--metrics-out", r.metrics_out},
                                          {"--curves", r.curves},
                                          {"--trace", r.trace_out},
                                          {"--save-model", r.save_model}};
  auto inputs = std::vector<std::string>{t->file, t->checkpoint, t->backbone.path};
  if (!r.resume_dir.empty())
    inputs.push_back(run_record_path(r.resume_dir));
  if (auto err = check_outputs(outputs, inputs))
    return err;
  if (auto err = check_flags(r, *mode))
    return err;
  // An actor run's plan, made once (its thread budgets with it), its faults
  // checked, before anything is prepared.
  std::optional<actor_job> job;
  if (r.mode.empty() && r.baseline.empty()) {
    auto made = actor_job_of(*mode, *t, r);
    if (!made)
      return made.error();
    job = std::move(*made);
  } else {
    derive_thread_budgets(*t); // the one process's torch threads
  }
  if (mode->starts_pretrained)
    if (auto ok = ensure_pretrained(*t); !ok)
      return ok.error();
  auto result = r.mode == "local"             ? mode->local(*t, r)
                : r.baseline == "separate" ? mode->run_separate(*t, r)
                                           : run_actors(std::move(*job), r);
  if (!result)
    return result.error();
  return finished_run{std::move(*t), std::move(*result), mode};
}

caf::error pretrain(const run_request& r) {
  auto t = load_request_topology(r);
  if (!t)
    return t.error();
  if (auto ok = pretrain_backbone(*t); !ok)
    return ok.error();
  return caf::none;
}

namespace {

/// The data's normalisation for the metrics and the saved model, computed
/// once; none (said in the log) where the training files are not read here
/// (on listed nodes, or gone): a save then reads them itself, and fails
/// with the reason.
std::optional<model::input_normalisation> normalisation_of(const topology& t) {
  try {
    return model::data_normalisation(t.data);
  } catch (const std::exception& e) {
    spdlog::info("the outputs go without the data's normalisation (the data is not read here: "
                 "{})",
                 e.what());
    return std::nullopt;
  }
}

} // namespace

caf::error write_outputs(const run_request& r, finished_run& run) {
  const auto& result = run.result;
  if (!r.metrics_out.empty() || !r.save_model.empty())
    run.result.normalisation = normalisation_of(run.workload);
  if (!r.metrics_out.empty()) {
    if (auto ok = write_metrics(result, r.metrics_out); !ok)
      return ok.error();
  }
  if (!r.curves.empty())
    if (auto ok = write_curves(result, r.curves); !ok)
      return ok.error();
  if (!r.trace_out.empty())
    if (auto err = write_chrome_trace(r.trace_out, result.actors))
      return err;
  if (!r.save_model.empty()) {
    const auto* mode = run.job;
    if (mode == nullptr || mode->save_model == nullptr)
      return make_error(errc::bad_config,
                        "--save-model: job: " + run.workload.job + " saves no model");
    if (auto ok = mode->save_model(run.workload, result, r.save_model); !ok)
      return ok.error();
  }
  // Only now: a run whose outputs failed may still be resumed.
  record_finished(r, result);
  return caf::none;
}

} // namespace modes
} // namespace baton::actors
