#include "actors/modes/transfer/transfer_plan.hpp"

#include <spdlog/spdlog.h>

#include "actors/modes/transfer/head_role_spec.hpp"
#include "actors/modes/transfer/stage_spec.hpp"
#include "actors/modes/transfer/transfer_section.hpp"
#include "actors/roles/source.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace transfer {

job_plan plan_transfer(const topology& t) {
  job_plan plan;
  // Only the heads train (the backbone is frozen), each with its own optimizer.
  plan.divergence_advice = fmt::format(
    "job: transfer trains each head with its own heads[].optimizer, one SGD step per minibatch "
    "of {} samples; lower that head's lr or momentum",
    t.plan.batch_size);
  auto source =
    make_planned_actor("source", "source", t.source_node, to_yaml(make_source_spec(t)));
  source.starts = true;
  plan.actors.push_back(std::move(source));
  std::string previous = "source";
  const auto& settings = transfer_settings_of(t);
  for (const auto& s : settings.stages) {
    stage_spec spec{t.backbone,
                    t.checkpoint,
                    static_cast<int64_t>(s.begin),
                    static_cast<int64_t>(s.end),
                    t.runtime.window,
                    t.runtime.stage_threads,
                    settings.features}; // one stage when not the default (transfer_section.cpp)
    auto stage = make_planned_actor("stage", s.name, s.node, to_yaml(spec));
    stage.threads = t.runtime.stage_threads;
    plan.actors.push_back(std::move(stage));
    plan.edges.push_back({planned_edge::kind_t::data, previous, s.name});
    previous = s.name;
  }
  for (const auto& h : settings.heads) {
    head_role_spec spec{h.spec, t.runtime.head_threads, t.runtime.progress_every, {}};
    auto head = make_planned_actor("head", h.spec.name, h.node, to_yaml(spec));
    head.threads = t.runtime.head_threads;
    head.trainable = true;
    head.result = h.spec.name;
    plan.actors.push_back(std::move(head));
    plan.edges.push_back({planned_edge::kind_t::data, previous, h.spec.name});
  }
  return plan;
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
