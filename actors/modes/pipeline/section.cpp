#include "actors/modes/pipeline/section.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "actors/modes/batch_norm.hpp"
#include "actors/modes/one_task.hpp"
#include "actors/modes/schedule_length.hpp"
#include "model/core/architecture.hpp"
#include "model/core/layer_listing.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

namespace {

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;


// `weight_gradient: next` moves a convolution's weight gradient: a declared
// backbone's layer `name` must be one (a TorchScript backbone's layers are
// checked when its stages are built).
void check_convolution(const field& f, const std::string& name, const topology& t) {
  if (!model::is_declared(t.backbone.name))
    return;
  for (const auto& layer : model::declare_model(t.backbone).layers)
    if (layer.name == name && layer.what == model::layer_declaration::kind::convolution)
      return;
  f.fail(f.name() + " is next, but '" + name + "' is not a convolution (the next stage "
         "computes the weight gradient of a stage that ends in one)");
}

// One `pipeline.stages` entry: the stage after `previous_end` up to its
// `last_layer`, on `replicas` machines.
stage_spec parse_stage(const field& item, const std::vector<std::string>& layers,
                       size_t previous_end, const topology& t, const section_spec& s) {
  check_section(item);
  field last = item.require("last_layer");
  std::string name = read_string(last);
  auto found = std::find(layers.begin(), layers.end(), name);
  if (found == layers.end())
    last.fail(last.name() + " names unknown layer '" + name + "' (expected one of: "
              + join(layers) + ")");
  auto end = static_cast<size_t>(found - layers.begin()) + 1;
  if (end <= previous_end)
    last.fail(last.name() + " is '" + name + "', which does not come after '"
              + layers[previous_end - 1] + "' (expected stages in layer order: "
              + join(layers) + ")");
  for (const auto& tie : t.backbone_ties)
    if (tie.first < end && end <= tie.other)
      last.fail(last.name() + " is '" + name + "', which ends a stage between " +
                tie.reason() + "; a pipeline trains a parameter in one stage (end this stage "
                "before '" + tie.first_layer + "', or at '" + tie.other_layer +
                "' or after it)");
  stage_spec stage{previous_end, end, 1, "", {}};
  read_if(item, "replicas", stage.replicas, [](const field& f) {
    return read_integer<int32_t>(f, 1, max_replicas,
                                 "a number of replicas from 1 to " + std::to_string(max_replicas));
  });
  read_if(item, "node", stage.node, [&](const field& f) { return read_node(f, t.nodes); });
  if (auto nodes = item.get("nodes")) {
    if (item.get("node"))
      nodes->fail("give either 'node' (every replica there) or 'nodes' (one per replica)");
    for (const field& n : nodes->items("a list of node names, one per replica",
                                       static_cast<size_t>(max_replicas)))
      stage.replica_nodes.push_back(read_node(n, t.nodes));
    if (stage.replica_nodes.size() != static_cast<size_t>(stage.replicas))
      nodes->fail(nodes->name() + " names " + std::to_string(stage.replica_nodes.size()) +
                  " nodes for " + std::to_string(stage.replicas) + " replicas");
  }
  read_if(item, "weight_gradient", stage.weight_gradient_next, [&](const field& f) {
    const std::string where = read_string(f);
    if (where != "here" && where != "next")
      f.fail(f.name() + " is '" + where + "' (expected here, the stage's own, or next: the "
             "next stage computes its last layer's weight gradient)");
    if (where == "next" && end == layers.size())
      f.fail(f.name() + " is next, but the last stage has no next stage to compute its "
             "weight gradient");
    if (where == "next")
      check_convolution(f, name, t);
    return where == "next";
  });
  if (stage.replicas > 1 && s.vertical_sync)
    item.fail("a replicated stage cannot run with pipeline.vertical_sync: a replica group's "
              "versions count group steps, not the input stage's (set replicas: 1 or "
              "vertical_sync: false)");
  return stage;
}

// `stages: auto` (or no stages): a provisional even split into as many
// stages as the planner may use (machines), which the mode's plan
// for a run replaces with the planner's (plan.cpp); checks read
// this one, which measures nothing.
void provisional_stages(const topology& t, size_t layers, section_spec& s) {
  const size_t count = std::min({static_cast<size_t>(machines_of(t)), layers,
                                 max_stages});
  s.stages_auto = true;
  s.stages.clear();
  for (size_t k = 0; k < count; ++k)
    s.stages.push_back({k * layers / count, (k + 1) * layers / count, 1, "", {}});
}

// The layers of the whole model being trained: the backbone's `layers` and
// its classifier "fc2", or a TorchScript backbone's alone when it already
// ends in the task's logits (model::list_pretrain_layers decides).
std::vector<std::string> trained_layers(std::vector<std::string> layers, const topology& t) {
  const auto* task = t.find_task(t.task);
  if (t.backbone.name == "torchscript" && task != nullptr) {
    try {
      return model::list_pretrain_layers(t.backbone, task->classes).names;
    } catch (const std::exception&) {
      // Reading the backbone reported its own errors; the stages are then
      // checked against the classifier's name as for any backbone.
    }
  }
  layers.push_back("fc2");
  return layers;
}

// `pipeline.stages`: a list of stages of the whole model being trained
// (trained_layers), the last ending with the model; `auto` or absent: the
// planner's.
void parse_stages(const std::optional<field>& stages, std::vector<std::string> layers,
                  const topology& t, section_spec& s) {
  layers = trained_layers(std::move(layers), t);
  if (!stages || stages->is_null() ||
      (stages->node().IsScalar() && stages->node().Scalar() == "auto"))
    return provisional_stages(t, layers.size(), s);
  if (stages->node().IsScalar())
    stages->expected("auto or a list of stages ({last_layer, replicas, node})");
  size_t actors = 0;
  for (const field& item :
       stages->items("a list of stages ({last_layer, replicas, node}), or auto",
                     max_stages)) {
    s.stages.push_back(
      parse_stage(item, layers, s.stages.empty() ? 0 : s.stages.back().end, t, s));
    actors += static_cast<size_t>(s.stages.back().replicas);
    if (actors > max_actors)
      item.fail(stages->name() + " asks for more than " + std::to_string(max_actors)
                + " stage actors, replicas counted (expected " + at_most(max_actors,
                                                                         "in all") + ")");
  }
  if (s.stages.empty() || s.stages.back().end != layers.size())
    stages->fail(stages->name() + " must end with a stage whose last_layer is the model's last "
                 "layer '" + layers.back() + "'");
}

// `pipeline:` (job: pipeline only; optional): the schedule and the stages.
section_spec parse_pipeline(const field& section, const std::vector<std::string>& layers,
                            const topology& t) {
  check_section(section);
  section_spec s;
  if (section.is_null()) {
    parse_stages(std::nullopt, layers, t, s);
    return s;
  }
  read_if(section, "schedule", s.schedule,
          [](const field& f) {
            return read_choice(f, {"gpipe", "1f1b-flush", "1f1b", "1f1b-dynamic"});
          });
  if (auto f = section.get("vertical_sync")) {
    s.vertical_sync = read_choice(*f, {"true", "false"}) == "true";
    if (s.vertical_sync && !asynchronous(s))
      f->fail("'pipeline.vertical_sync' applies to schedule 1f1b only (the schedule is '"
              + s.schedule + "')");
  }
  parse_stages(section.get("stages"), layers, t, s);
  return s;
}

/// The smallest microbatch of a minibatch of `size` samples cut into
/// data.microbatches pieces, as model::plan_epoch cuts it.
int64_t smallest_microbatch(int64_t size, int32_t microbatches) {
  const int64_t parts = std::min<int64_t>(microbatches, size);
  return size / parts;
}

/// resnet18's batch norm normalises over a microbatch in training: every
/// microbatch, the last minibatch's too, needs at least 2 samples
/// (actors/modes/batch_norm.hpp).
void check_batch_norm(const field& root, const topology& t) {
  if (t.backbone.name != "resnet18")
    return;
  const int64_t batch = t.plan.batch_size;
  const int32_t parts = t.plan.microbatches;
  const std::string model = "model 'resnet18'";
  refuse_batch_norm_step(data_key_or_root(root, "microbatches"),
                         smallest_microbatch(batch, parts),
                         "data.batch_size " + std::to_string(batch) + " in " +
                           std::to_string(parts) + " microbatches leaves " +
                           std::to_string(smallest_microbatch(batch, parts)) +
                           " sample in a microbatch",
                         model);
  const auto samples = known_training_samples(t);
  const int64_t last = samples ? *samples % batch : 0;
  if (last > 0 && smallest_microbatch(last, parts) < 2)
    refuse_batch_norm_step(
      data_key_or_root(root, t.data.train_samples_key()), 1,
      std::to_string(*samples) + " training samples end each epoch with a minibatch of " +
        std::to_string(last) + " in " + std::to_string(std::min<int64_t>(parts, last)) +
        " microbatches, one of 1 sample",
      model);
}

// The stages are its own section's; `heads` of older files name the task.
/// The stages step with the workload's optimizer (backbone.pretrain.optimizer
/// overrides it); each holds the state of its own layers and counts its
/// schedule's steps from the training samples (schedule_length.hpp).
/// Refused: a schedule where the data cannot be read, and clip_grad_norm
/// (its norm is over every stage's gradient, which no stage has).
void check_optimizer_of(const field& root, topology& t) {
  const auto pretrain = root.section("backbone").section("pretrain").get("optimizer");
  const auto workload = root.get("optimizer");
  if (!pretrain && !workload)
    return;
  const field& blame = pretrain ? *pretrain : *workload;
  const auto& o = t.pretrain.optimizer;
  count_schedule_samples(blame, o, t, "job: pipeline's stages");
  if (o.clip_grad_norm > 0)
    blame.fail(blame.name() + ": job: pipeline cannot clip_grad_norm (the norm is over every "
               "stage's gradient, which no stage has); expected no clip_grad_norm");
}

job_reading parse(const field& root, const std::vector<std::string>& layers, topology& t) {
  read_one_task_heads(root, t);
  check_optimizer_of(root, t);
  job_reading job;
  auto settings = parse_pipeline(root.section("pipeline"), layers, t);
  check_batch_norm(root, t);
  if (asynchronous(settings))
    job.refuses_recovery.push_back(
      {"pipeline.schedule", "asks for recovery, which needs a synchronous schedule (gpipe or "
                            "1f1b-flush): under asynchronous 1f1b no step has every stage's "
                            "weights consistent and nothing in flight"});
  job.settings = std::move(settings);
  return job;
}

} // namespace

int32_t machines_of(const topology& t) {
  return t.embedded() ? embedded_stages : static_cast<int32_t>(t.nodes.size());
}

bool asynchronous(const section_spec& s) {
  return s.schedule == "1f1b" || s.schedule == "1f1b-dynamic";
}

const section_spec& section_of(const topology& t) {
  return std::any_cast<const section_spec&>(t.mode_spec);
}

std::vector<strategy_variant> variants() {
  strategy_variant one_f_one_b{"pipeline:1f1b", "the model split into the planner's stages, one "
                                                "forward one backward, weight stashing",
                               {"pipeline.schedule=1f1b"}};
  // gpipe's flush leaves every stage but one idle with one microbatch: 4.
  strategy_variant gpipe{"pipeline:gpipe", "the planner's stages, all forwards then all "
                                           "backwards of microbatches, a flush per minibatch",
                         {"pipeline.schedule=gpipe"}};
  gpipe.microbatches = 4;
  return {one_f_one_b, gpipe};
}

job_schema schema() {
  job_schema schema;
  schema.name = "pipeline";
  schema.section = "pipeline";
  schema.keys = {{"pipeline", {"schedule", "vertical_sync", "stages"}},
                 {"pipeline.stages.*", {"last_layer", "replicas", "node", "nodes", "weight_gradient"}}};
  schema.lists = {"pipeline.stages"};
  schema.refusals = {{"backbone.split", "job: pipeline takes its stages from the 'pipeline' "
                                        "section (`baton profile` then `baton plan --out` "
                                        "writes one)"}};
  add_one_task_heads(schema);
  schema.parse = parse;
  schema.trains = "pipeline splits backbone.model: convnet, convnet_wide, resnet18 or "
                  "torchscript";
  return schema;
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
