#include "actors/modes/pipeline/plan.hpp"

#include <cmath>
#include <string>

#include <spdlog/spdlog.h>

#include "actors/modes/backbone_split.hpp"
#include "actors/modes/schedule_length.hpp"

#include "actors/modes/pipeline/section.hpp"
#include "actors/modes/pipeline/stage_settings.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "model/core/batches.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

namespace {

/// PipeDream's NOAM: a stage admits as many microbatches as there are
/// workers from it to the end of the pipeline, per replica.
std::vector<int32_t> noam_of(const std::vector<stage_spec>& stages) {
  int32_t workers_after = 0;
  std::vector<int32_t> noam(stages.size());
  for (size_t i = stages.size(); i-- > 0;) {
    workers_after += stages[i].replicas;
    noam[i] = (workers_after + stages[i].replicas - 1) / stages[i].replicas;
  }
  return noam;
}

caf::error check_stages(const topology& t) {
  const auto& stages = section_of(t).stages;
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].replicas > t.plan.microbatches)
      return make_error(errc::bad_config,
                        t.file + ": pipeline stage " + std::to_string(i) + " has " +
                          std::to_string(stages[i].replicas) + " replicas but a minibatch has " +
                          std::to_string(t.plan.microbatches) +
                          " microbatches (data.microbatches): microbatches are dealt to "
                          "replicas by position, so a replica would get none");
  return caf::none;
}

/// Stage i's settings, for every replica but its index; `epoch` counts the
/// steps of a scheduled optimizer (none: a constant lr).
stage_settings stage_settings_of(const topology& t, const model::task& task, size_t i,
                                 int32_t max_in_flight,
                                 const std::optional<model::epoch_counts>& epoch) {
  const auto& settings = section_of(t);
  const auto& stages = settings.stages;
  stage_settings spec;
  spec.backbone = t.backbone;
  spec.classes = task.classes;
  spec.task = task.name;
  spec.begin = static_cast<int64_t>(stages[i].begin);
  spec.end = static_cast<int64_t>(stages[i].end);
  spec.first = i == 0;
  spec.last = i + 1 == stages.size();
  spec.schedule = settings.schedule;
  spec.optimizer = t.pretrain.optimizer;
  if (epoch) {
    // A step per minibatch under a flush schedule and for a replica group;
    // an unreplicated 1f1b stage steps after every microbatch.
    const bool per_minibatch = !asynchronous(settings) || stages[i].replicas > 1;
    spec.steps_per_epoch = per_minibatch ? epoch->minibatches : epoch->microbatches;
    spec.epochs = t.plan.epochs;
  }
  spec.checkpoint = t.checkpoint;
  spec.window = t.runtime.window;
  spec.threads = t.runtime.compute_threads;
  spec.progress_every = t.runtime.progress_every;
  spec.replicas = stages[i].replicas;
  spec.upstream_replicas = i == 0 ? 1 : stages[i - 1].replicas;
  spec.max_in_flight = settings.schedule == "gpipe" ? 0 : max_in_flight;
  spec.vertical_sync = settings.vertical_sync;
  spec.hands_on_weight_gradient = stages[i].weight_gradient_next;
  spec.takes_weight_gradient = i > 0 && stages[i - 1].weight_gradient_next;
  return spec;
}

/// The divergence warning's advice: under 1f1b every microbatch is an SGD
/// step on weights some steps stale (as many as the stage's NOAM in the
/// static order; more with a wider runtime.window in 1f1b-dynamic), so
/// it is far less forgiving of an lr than the synchronous schedules, which
/// take one step per minibatch.
std::string divergence_advice(const topology& t) {
  const auto& o = t.pretrain.optimizer;
  const std::string& schedule = section_of(t).schedule;
  if (schedule != "1f1b" && schedule != "1f1b-dynamic")
    return fmt::format("job: pipeline ({}) takes one SGD step per minibatch of {} samples with "
                       "lr {:g} and momentum {:g}; lower backbone.pretrain.optimizer's lr or "
                       "momentum",
                       schedule, t.plan.batch_size, o.lr, o.momentum);
  const std::string stale = schedule == "1f1b"
                              ? "as many steps stale as the stage's microbatches in flight "
                                "(PipeDream's NOAM: the stages after it, plus one)"
                              : fmt::format("as stale as the microbatches in flight "
                                            "(runtime.window {})",
                                            t.runtime.window);
  return fmt::format("job: pipeline ({}) takes an SGD step for every microbatch (1 of {} per "
                     "minibatch of {} samples) with lr {:g} and momentum {:g}, on weights {}; "
                     "lower backbone.pretrain.optimizer's lr or momentum, or use schedule "
                     "1f1b-flush or gpipe",
                     schedule, t.plan.microbatches, t.plan.batch_size, o.lr, o.momentum,
                     stale);
}

/// "[conv1..pool1] [conv2..fc2]": the planned stages' layers.
std::string stage_ranges(const backbone_split& b) {
  std::string out;
  for (const auto& s : b.plan.stages)
    out += (out.empty() ? "[" : " [") + layer_range(s, b.profile.layers) + "]";
  return out;
}

/// Logs the planner's stages: the stages, what was measured, the predicted
/// time of every stage.
void log_planned_stages(const backbone_split& b, int32_t machines) {
  const auto& p = b.profile;
  spdlog::info("pipeline: stages from the planner: {} (profile of {}: {} layers, microbatch of "
               "{} samples, {:.2f} s, {} torch thread{}, {} with {} cores; planned for at most "
               "{} machines, links {}); predicted per microbatch: slowest stage {:.3f} ms",
               stage_ranges(b), p.model, p.layers.size(), p.microbatch_size, b.profile_seconds,
               p.threads, p.threads == 1 ? "" : "s", p.hostname, p.cores, machines,
               std::isinf(b.bandwidth) ? std::string{"free (one process)"}
                                       : fmt::format("{:.3g} bytes/s", b.bandwidth),
               1e3 * b.plan.slowest_seconds);
  for (size_t k = 0; k < b.plan.stages.size(); ++k) {
    const auto& s = b.plan.stages[k];
    spdlog::info("  stage{} {}: compute {:.3f} ms, send {:.3f} ms{}", k,
                 layer_range(s, p.layers), 1e3 * s.compute_seconds, 1e3 * s.output_seconds,
                 s.weight_gradient_next
                   ? fmt::format(" (stage{} computes the weight gradient of {})", k + 1,
                                 p.layers[s.end - 1].name)
                   : std::string{});
  }
}

} // namespace

caf::expected<std::vector<std::string>> settle_stages(topology& t) {
  auto settings = section_of(t);
  if (!settings.stages_auto)
    return std::vector<std::string>{};
  const int32_t machines = machines_of(t);
  auto planned = plan_pipeline_stages(t, machines, !t.embedded());
  if (!planned)
    return planned.error();
  log_planned_stages(*planned, machines);
  settings.stages.clear();
  std::string ends;
  for (const auto& s : planned->plan.stages) {
    settings.stages.push_back({s.begin, s.end, 1, "", {}, s.weight_gradient_next});
    ends += (ends.empty() ? "{last_layer: " : ", {last_layer: ")
            + planned->profile.layers[s.end - 1].name
            + (s.weight_gradient_next ? ", weight_gradient: next}" : "}");
  }
  settings.stages_auto = false;
  t.mode_spec = settings;
  return std::vector<std::string>{"pipeline.stages=[" + ends + "]"};
}

caf::expected<job_plan> plan(const topology& t, plan_use use) {
  if (use == plan_use::check || !section_of(t).stages_auto)
    return plan(t);
  topology settled = t;
  auto overrides = settle_stages(settled);
  if (!overrides)
    return overrides.error();
  auto out = plan(settled);
  if (out)
    out->settled = std::move(*overrides);
  return out;
}

caf::expected<job_plan> plan(const topology& t) {
  // Trainable stages of backbone + classifier, trained on the workload's task
  // with the pretrain optimiser (the model `baton pretrain` trains alone).
  const auto* task = t.find_task(t.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "task '" + t.task +
                                          "' is not one of the topology's tasks");
  if (auto err = check_stages(t))
    return err;
  auto source_spec = make_source_settings(t);
  std::optional<model::epoch_counts> epoch;
  if (t.pretrain.optimizer.scheduled()) {
    const auto samples = planned_training_samples(t, "job: pipeline's stages");
    if (!samples)
      return samples.error();
    epoch = model::count_epoch(*samples, t.plan);
    source_spec.train_samples = *samples;
  }
  job_plan plan;
  plan.divergence_advice = divergence_advice(t);
  plan.result_label = "stage"; // the last stage's result: the model's
  auto source = make_planned_actor("source", "source", t.source_node, to_yaml(source_spec));
  source.starts = true;
  const auto& stages = section_of(t).stages;
  // Beside the stage it feeds unless data.node places it: its microbatches
  // and their credits then cross no process (docs/pipeline.md, placement).
  if (t.source_node.empty() && !stages.empty())
    source.with = stages.front().replicas > 1 ? "stage0.0" : "stage0";
  plan.actors.push_back(std::move(source));
  auto noam = noam_of(stages);
  std::vector<std::vector<std::string>> levels{{"source"}};
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& stage = stages[i];
    auto spec = stage_settings_of(t, *task, i, noam[i], epoch);
    auto base = "stage" + std::to_string(i);
    levels.emplace_back();
    for (int32_t r = 0; r < stage.replicas; ++r) {
      spec.replica = r;
      auto name = stage.replicas > 1 ? base + "." + std::to_string(r) : base;
      auto a = make_planned_actor("pipeline_stage", name, stage.node_of(r), to_yaml(spec));
      a.threads = t.runtime.compute_threads;
      a.trainable = true;
      a.sends_weights = r == 0;
      if (spec.last)
        a.result = base;
      plan.actors.push_back(std::move(a));
      levels.back().push_back(name);
    }
  }
  for (size_t l = 0; l + 1 < levels.size(); ++l)
    for (const auto& from : levels[l])
      for (const auto& to : levels[l + 1])
        plan.edges.push_back({planned_edge::kind_t::data, from, to});
  for (const auto& level : levels)
    for (size_t r = 0; level.size() > 1 && r < level.size(); ++r)
      for (size_t peer = 0; peer < level.size(); ++peer)
        if (peer != r)
          plan.edges.push_back(
            {planned_edge::kind_t::peer, level[r], level[peer], static_cast<int32_t>(peer)});
  return plan;
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
