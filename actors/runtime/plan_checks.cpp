#include "actors/runtime/plan_checks.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "actors/config/yaml_codec.hpp"
#include "actors/config/yaml_field.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

using detail::contains;
using detail::join;

caf::error refuse(const fault_spec& f, const std::string& what) {
  return make_error(errc::bad_config, f.where + ": fault '" + f.kind + "'" + what);
}

/// A `delay` or `drop` names a data edge of the plan: `from` one of its
/// senders, `to` one of the receivers `from` sends to.
caf::error check_edge(const fault_spec& f, const job_plan& plan) {
  std::vector<std::string> senders, receivers, of_sender;
  for (const auto& e : plan.edges) {
    if (e.kind != planned_edge::kind_t::data)
      continue;
    if (!contains(senders, e.from))
      senders.push_back(e.from);
    if (!contains(receivers, e.to))
      receivers.push_back(e.to);
    if (e.from == f.from)
      of_sender.push_back(e.to);
  }
  if (senders.empty())
    return refuse(f, " names an edge, but this job sends no microbatches on credit edges");
  if (!contains(senders, f.from))
    return refuse(f, ": 'from' must be one of " + join(senders));
  if (!contains(receivers, f.to))
    return refuse(f, ": 'to' must be one of " + join(receivers));
  if (!contains(of_sender, f.to))
    return refuse(f, ": '" + f.from + "' sends to " + join(of_sender) + " (not '" + f.to + "')");
  return caf::none;
}

} // namespace

caf::error check_faults(const std::vector<fault_spec>& faults, const job_plan& plan) {
  const auto trainable = plan.trainable_names();
  for (const auto& f : faults) {
    if (f.kind == "throw" && !contains(trainable, f.actor))
      return refuse(f, " names actor '" + f.actor + "', which is not a trainable actor of this "
                       "job (" + join(trainable) + ")");
    if (f.kind == "delay" || f.kind == "drop")
      if (auto err = check_edge(f, plan))
        return err;
  }
  return caf::none;
}

int32_t compute_actors(const job_plan& plan) {
  return static_cast<int32_t>(std::count_if(plan.actors.begin(), plan.actors.end(),
                                            [](const planned_actor& a) { return a.threads > 0; }));
}

namespace {

int32_t share_of(int32_t cores, int32_t actors) {
  return std::max<int32_t>(1, cores / std::max<int32_t>(1, actors));
}

} // namespace

void derive_thread_budgets(runtime_spec& r, int32_t actors, int32_t cores) {
  if (!r.compute_threads_asked)
    r.compute_threads = share_of(cores, actors);
}

void set_thread_budgets(job_plan& plan, int32_t cores) {
  const int32_t share = share_of(cores, compute_actors(plan));
  for (auto& a : plan.actors) {
    if (a.threads <= 0 || a.threads_asked || a.threads == share)
      continue;
    auto settings = YAML::Load(a.settings);
    if (!settings.IsMap() || !settings["threads"])
      continue; // no torch threads of its own (a source)
    settings["threads"] = share;
    a.settings = dump(settings);
    a.threads = share;
  }
}

int32_t cores() {
  return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

void place_round_robin(job_plan& plan, const std::vector<std::string>& nodes) {
  size_t slot = 0;
  for (auto& a : plan.actors) {
    if (!a.with.empty())
      continue;
    const bool kept = std::find(nodes.begin(), nodes.end(), a.node) != nodes.end();
    if (!kept)
      a.node = nodes.empty() ? std::string{} : nodes[slot % nodes.size()];
    ++slot;
  }
  for (auto& a : plan.actors)
    if (const auto* beside = plan.find(a.with); beside != nullptr)
      a.node = beside->node;
}

caf::error settle_plan(job_plan& plan, const topology& t) {
  const auto& r = t.runtime;
  for (auto& a : plan.actors)
    a.threads_asked = a.threads_asked || r.compute_threads_asked;
  if (r.compute_threads_asked)
    plan.threads_asked_by = std::string("runtime.compute_threads")
                            + (plan.threads_asked_by.empty() ? "" : ", ")
                            + plan.threads_asked_by;
  std::vector<std::string> nodes;
  for (const auto& n : t.nodes)
    nodes.push_back(n.name);
  place_round_robin(plan, nodes);
  set_thread_budgets(plan, cores());
  return check_faults(t.faults, plan);
}

} // namespace runtime
} // namespace baton::actors
