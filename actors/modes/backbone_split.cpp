#include "actors/modes/backbone_split.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <spdlog/spdlog.h>

#include "messages/errc.hpp"
#include "model/core/error.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/pretrain.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

// `backbone.split: auto` profiles at every run: few microbatches, so that it
// takes well under a second for convnet and a few for convnet_wide.
constexpr int32_t split_warmups = 2;
constexpr int32_t split_timed_microbatches = 5;

/// The classes of the task a pipeline trains (10 when it names none).
int64_t classes_of_task(const topology& t) {
  const auto* task = t.find_task(t.task);
  return task != nullptr ? task->classes : 10;
}

/// The profile of the model `t` runs in stages with its seeded initial
/// weights (the time of a layer does not depend on the weights' values, so
/// no checkpoint is loaded): `training`, the pipeline's whole model (backbone
/// + classifier "fc2") forward and backward with an optimiser step; else the
/// frozen backbone forward only. `what` names the setting in errors.
caf::expected<model::model_profile> profile_stages(const topology& t, bool training,
                                                   const std::string& what) {
  model::profile_options options;
  options.microbatch_size = microbatch_size_of(t);
  options.sample_shape = sample_shape_of(t);
  options.microbatches = split_timed_microbatches;
  options.warmups = split_warmups;
  options.threads = t.runtime.compute_threads;
  options.seed = t.seed;
  options.backward = training;
  options.weight_gradients = false; // this split hands no weight half on
  options.optimizer = t.pretrain.optimizer;
  try {
    auto m = training ? model::make_pretrain_model(t.backbone, classes_of_task(t))
                      : model::make_model(t.backbone);
    if (!training) {
      m.set_trainable(false);
      m.train(false);
    }
    auto profile = model::profile_model(m, options);
    profile.model = t.backbone.name;
    return profile;
  } catch (const std::exception& e) { // model::error, c10::Error
    return make_error(errc::bad_config, t.file + ": " + what + ": cannot profile the model: " +
                                          e.what());
  }
}

/// Profiles and partitions into straight stages (see plan_backbone_split).
caf::expected<backbone_split> plan_stages(const topology& t, model::partition_options options,
                                          bool training, bool across_processes,
                                          const std::string& what) {
  backbone_split out;
  const auto started = std::chrono::steady_clock::now();
  auto profile = profile_stages(t, training, what);
  if (!profile)
    return profile.error();
  out.profile = std::move(*profile);
  out.profile_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  options.straight = true;
  options.forward_only = !training;
  // A trained parameter shared by two layers (tied weights) stays in one
  // stage: no cut between them. A frozen backbone's ties need no such care.
  if (training)
    for (const auto& tie : t.backbone_ties) {
      options.joined.resize(std::max(options.joined.size(), tie.other + 1), false);
      for (size_t k = tie.first + 1; k <= tie.other; ++k)
        options.joined[k] = true;
    }
  options.bandwidth = !across_processes    ? std::numeric_limits<double>::infinity()
                      : t.link_bandwidth > 0 ? t.link_bandwidth
                                             : default_link_bandwidth;
  out.bandwidth = options.bandwidth;
  try {
    out.plan = model::plan_partition(out.profile.layers, options);
  } catch (const model::error& e) {
    return make_error(errc::bad_config, t.file + ": " + what + ": " + e.what());
  }
  for (size_t k = 0; k + 1 < out.plan.stages.size(); ++k)
    out.split.push_back(out.profile.layers[out.plan.stages[k].end - 1].name);
  return out;
}

} // namespace

std::vector<int64_t> sample_shape_of(const workload& w) { return w.sample_shape; }

int64_t microbatch_size_of(const workload& w) {
  return std::max<int64_t>(1, w.plan.batch_size / w.plan.microbatches);
}

std::string layer_range(const model::stage_plan& s, const std::vector<model::layer_cost>& layers) {
  if (s.end - s.begin == 1)
    return layers[s.begin].name;
  return layers[s.begin].name + ".." + layers[s.end - 1].name;
}

caf::expected<backbone_split> plan_backbone_split(const topology& t, int32_t stages,
                                                  bool across_processes) {
  model::partition_options options;
  options.machines = stages;
  options.stages = stages;
  return plan_stages(t, options, false, across_processes, "backbone.split: auto");
}

caf::expected<backbone_split> plan_pipeline_stages(const topology& t, int32_t machines,
                                                   bool across_processes) {
  model::partition_options options;
  options.machines = machines;
  return plan_stages(t, options, true, across_processes, "pipeline.stages: auto");
}

void log_backbone_split(const backbone_split& b) {
  const auto& p = b.profile;
  double whole = 0;
  for (const auto& l : p.layers)
    whole += l.forward_seconds;
  spdlog::info("backbone.split: auto: profiled {} forward only in {:.2f} s ({} layers, "
               "microbatch of {} samples, {} timed after {} warm-ups, {} torch thread{}, {} "
               "with {} cores); links between stages: {}",
               p.model, b.profile_seconds, p.layers.size(), p.microbatch_size, p.microbatches,
               split_warmups, p.threads, p.threads == 1 ? "" : "s", p.hostname, p.cores,
               std::isinf(b.bandwidth) ? std::string{"free (one process)"}
                                       : fmt::format("{:.3g} bytes/s (node processes)",
                                                     b.bandwidth));
  std::string split;
  for (const auto& name : b.split)
    split += (split.empty() ? "" : ", ") + name;
  spdlog::info("backbone.split: auto chose split: [{}] ({} stages); predicted per microbatch: "
               "slowest stage {:.3f} ms, whole backbone {:.3f} ms",
               split, b.plan.stages.size(), 1e3 * b.plan.slowest_seconds, 1e3 * whole);
  for (size_t k = 0; k < b.plan.stages.size(); ++k) {
    const auto& s = b.plan.stages[k];
    spdlog::info("  stage{} {}: forward {:.3f} ms, send {:.3f} ms", k,
                 layer_range(s, p.layers), 1e3 * s.compute_seconds, 1e3 * s.output_seconds);
  }
}

} // namespace modes
} // namespace baton::actors
