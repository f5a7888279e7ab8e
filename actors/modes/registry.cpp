#include "actors/modes/registry.hpp"

#include <algorithm>

#include "actors/modes/data_parallel/cost.hpp"
#include "actors/modes/data_parallel/local.hpp"
#include "actors/modes/data_parallel/plan.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/ist/cost.hpp"
#include "actors/modes/ist/export.hpp"
#include "actors/modes/ist/local.hpp"
#include "actors/modes/ist/plan.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/block_scheme.hpp"
#include "actors/modes/ist/neuron_scheme.hpp"
#include "actors/modes/data_parallel/shard.hpp"
#include "actors/modes/pipeline/cost.hpp"
#include "actors/modes/pipeline/local.hpp"
#include "actors/modes/pipeline/plan.hpp"
#include "actors/modes/pipeline/section.hpp"
#include "actors/modes/pipeline/stage.hpp"
#include "actors/modes/transfer/head.hpp"
#include "actors/modes/transfer/stage.hpp"
#include "actors/modes/pretraining.hpp"
#include "actors/modes/transfer/export.hpp"
#include "actors/modes/transfer/local.hpp"
#include "actors/modes/transfer/plan.hpp"
#include "actors/modes/transfer/section.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/local_run.hpp"
#include "actors/runtime/plan_checks.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace modes {

const mode_registry& registry() {
  // One entry a mode: schema, plan, local reference (and baseline),
  // export, cost; its roles (`true`: its actors train); its rows of
  // compare's catalogue (in this order); whether it has a separate
  // baseline; whether it starts pretrained; whether it traces. The first
  // is the default job (`job:` absent). Transfer, data-parallel and a
  // pipeline start from backbone.checkpoint when it names one; IST's shards
  // make the initial network from the seed (its section refuses a
  // checkpoint).
  static const mode_registry modes = [] {
    mode_registry r;
    r.modes = {
      {transfer::schema(), transfer::plan, transfer::run_without_actors, transfer::save_model, nullptr,
       {{"stage", transfer::spawn_stage_role}, {"head", transfer::spawn_head_role, true}}, {}, true, true},
      {data_parallel::schema(), same_plan<data_parallel::plan>, data_parallel::run_local, data_parallel::save_model, data_parallel::cost,
       {{"data_parallel_worker", data_parallel::spawn_worker_role, true}, {"data_parallel_shard", data_parallel::spawn_shard_role}},
       data_parallel::variants(), false, true},
      {pipeline::schema(), pipeline::plan, pipeline::run_local, pipeline::save_model, pipeline::cost,
       {{"pipeline_stage", pipeline::spawn_stage_role, true}}, pipeline::variants(), false, true, true},
      {ist::schema(), same_plan<ist::plan>, ist::run_local, ist::save_model, ist::cost,
       {{"ist_worker", ist::neuron_scheme::spawn_worker_role, true}, {"ist_shard", ist::neuron_scheme::spawn_shard_role},
        {"resist_worker", ist::block_scheme::spawn_worker_role, true}, {"resist_shard", ist::block_scheme::spawn_shard_role}},
       ist::variants()},
    };
    r.roles = {{"source", spawn_source_role}};
    for (const auto& m : r.modes) {
      r.schemas.push_back(m.schema);
      r.roles.insert(r.roles.end(), m.roles.begin(), m.roles.end());
    }
    return r;
  }();
  return modes;
}

const std::vector<mode>& all_modes() {
  return registry().modes;
}

const std::vector<role_type>& all_roles() {
  return registry().roles;
}

bool role_trains(const std::string& role) {
  const auto& roles = all_roles();
  return std::any_of(roles.begin(), roles.end(),
                     [&](const role_type& r) { return r.name == role && r.trains; });
}

const std::vector<job_schema>& all_job_schemas() {
  return registry().schemas;
}

const mode* find_mode(const std::string& name) {
  return registry().find(name);
}

namespace {

/// `t` with the thread budgets it leaves unset derived from its plan, its
/// faults checked against the same plan (made once, and only when there is
/// something to derive or check); a plan that cannot be made is plan_of's
/// to refuse.
caf::expected<topology> checked_against_plan(caf::expected<topology> t) {
  if (!t)
    return t;
  const auto* mode = find_mode(t->job);
  const bool derive = !t->runtime.compute_threads_asked;
  if (mode == nullptr || (!derive && t->faults.empty()))
    return t;
  auto plan = mode->plan(*t, plan_use::check);
  if (!plan)
    return t;
  if (derive)
    derive_thread_budgets(t->runtime, compute_actors(*plan), cores());
  if (auto err = check_faults(t->faults, *plan))
    return err;
  return t;
}

} // namespace

caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  return checked_against_plan(load_topology(path, overrides, all_job_schemas()));
}

caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides) {
  return checked_against_plan(parse_topology(yaml_text, name, overrides, all_job_schemas()));
}

caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides) {
  return checked_against_plan(parse_topology_as(yaml_text, path, overrides, all_job_schemas()));
}

caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides) {
  return topology_values(yaml_text, name, overrides, all_job_schemas());
}

void derive_thread_budgets(topology& t) {
  const auto* mode = find_mode(t.job);
  if (mode == nullptr || t.runtime.compute_threads_asked)
    return;
  if (auto plan = mode->plan(t, plan_use::check))
    derive_thread_budgets(t.runtime, compute_actors(*plan), cores());
}

caf::expected<job_plan> plan_of(const topology& t) {
  const auto* mode = find_mode(t.job);
  if (mode == nullptr)
    return make_error(errc::bad_config, t.file + ": no training mode '" + t.job + "'");
  return plan_of(*mode, t);
}

caf::expected<costed_strategy> cost_of(const cost_request& q, cost_profiles& profiles) {
  const auto* mode = find_mode(q.t.job);
  if (mode != nullptr && mode->cost != nullptr)
    return mode->cost(q, profiles);
  std::string modelled;
  for (const auto& m : all_modes())
    if (m.cost != nullptr)
      modelled += (modelled.empty() ? "" : ", ") + m.name();
  return refuse_cost(q.name, "job: " + q.t.job + " has no cost model (" + modelled +
                               " have one)");
}

} // namespace modes
} // namespace baton::actors
