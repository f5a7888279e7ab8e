#include "actors/modes/transfer/plan.hpp"

#include <algorithm>
#include <cassert>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/modes/backbone_split.hpp"
#include "actors/modes/schedule_length.hpp"

#include "actors/modes/transfer/head_settings.hpp"
#include "actors/modes/transfer/stage_settings.hpp"
#include "actors/modes/transfer/section.hpp"
#include "actors/roles/source.hpp"
#include "model/core/batches.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

// The heads, each fed by `previous` (the last stage, or each replica's);
// their torch threads are runtime.head_threads when it is set, else the
// common compute_threads. A head with a scheduled optimizer steps once per
// minibatch of an epoch of `samples` (schedule_length.hpp).
void add_heads(job_plan& plan, const topology& t, const section_spec& settings,
               const std::vector<std::string>& previous, const std::optional<int64_t>& samples) {
  const int32_t threads =
    settings.head_threads > 0 ? settings.head_threads : t.runtime.compute_threads;
  if (settings.head_threads > 0)
    plan.threads_asked_by = "runtime.head_threads";
  for (const auto& h : settings.heads) {
    head_settings spec{h.spec, 0, 0, threads, t.runtime.progress_every, {}, settings.replicas};
    if (samples && h.spec.optimizer.scheduled()) {
      spec.steps_per_epoch = model::count_epoch(*samples, t.plan).minibatches;
      spec.epochs = t.plan.epochs;
    }
    auto head = make_planned_actor("head", h.spec.name, h.node, to_yaml(spec));
    head.threads = threads;
    head.threads_asked = settings.head_threads > 0;
    head.trainable = true;
    head.sends_weights = true; // its trained weights, for --save-model
    head.result = h.spec.name;
    plan.actors.push_back(std::move(head));
    for (const auto& from : previous)
      plan.edges.push_back({planned_edge::kind_t::data, from, h.spec.name});
  }
}

} // namespace

caf::expected<job_plan> plan(const topology& t) {
  const auto& settings = section_of(t);
  auto source_spec = make_source_settings(t);
  std::optional<int64_t> samples;
  if (std::any_of(settings.heads.begin(), settings.heads.end(),
                  [](const head_placement& h) { return h.spec.optimizer.scheduled(); })) {
    auto planned = planned_training_samples(t, "job: transfer's heads");
    if (!planned)
      return planned.error();
    samples = *planned;
    source_spec.train_samples = *samples;
  }
  job_plan plan;
  // Only the heads train (the backbone is frozen), each with its own optimizer.
  plan.divergence_advice = fmt::format(
    "job: transfer trains each head with its own heads[].optimizer, one SGD step per minibatch "
    "of {} samples; lower that head's lr or momentum",
    t.plan.batch_size);
  // Replicas of the backbone take the source's microbatches in turns.
  source_spec.deal_in_turns = settings.replicas > 1;
  auto stage_name = [&](const stage_placement& s, int32_t replica) {
    return settings.replicas > 1 ? s.name + "." + std::to_string(replica) : s.name;
  };
  auto source = make_planned_actor("source", "source", t.source_node, to_yaml(source_spec));
  source.starts = true;
  // Beside the stage it feeds unless data.node places it (pipeline/plan.cpp).
  if (t.source_node.empty() && !settings.stages.empty())
    source.with = stage_name(settings.stages.front(), 0);
  plan.actors.push_back(std::move(source));
  // A chain of stages per replica, from the source to every head.
  std::vector<std::string> previous(settings.replicas, "source");
  for (const auto& s : settings.stages) {
    stage_settings spec{t.backbone,
                    t.checkpoint,
                    static_cast<int64_t>(s.begin),
                    static_cast<int64_t>(s.end),
                    t.runtime.window,
                    t.runtime.compute_threads,
                    settings.features}; // one stage when not the default (section.cpp)
    for (int32_t r = 0; r < settings.replicas; ++r) {
      auto stage = make_planned_actor("stage", stage_name(s, r), s.node_of(r), to_yaml(spec));
      stage.threads = t.runtime.compute_threads;
      plan.actors.push_back(std::move(stage));
      plan.edges.push_back({planned_edge::kind_t::data, previous[r], stage_name(s, r)});
      previous[r] = stage_name(s, r);
    }
  }
  add_heads(plan, t, settings, previous, samples);
  return plan;
}

caf::expected<void> resolve_backbone_split(topology& t) {
  auto& settings = section_of(t);
  if (!settings.split_auto)
    return caf::unit;
  auto& stages = settings.stages;
  auto planned =
    plan_backbone_split(t, static_cast<int32_t>(stages.size()), !t.embedded());
  if (!planned)
    return planned.error();
  log_backbone_split(*planned);
  assert(planned->plan.stages.size() == stages.size() && "the plan has one stage per placement");
  for (size_t k = 0; k < stages.size(); ++k) {
    stages[k].begin = planned->plan.stages[k].begin;
    stages[k].end = planned->plan.stages[k].end;
  }
  settings.split_auto = false;
  return caf::unit;
}

caf::expected<job_plan> plan(const topology& t, plan_use use) {
  if (use == plan_use::check || !section_of(t).split_auto)
    return plan(t);
  topology settled = t;
  if (auto resolved = resolve_backbone_split(settled); !resolved)
    return resolved.error();
  return plan(settled);
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
