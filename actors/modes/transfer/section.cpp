#include "actors/modes/transfer/section.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/modes/schedule_length.hpp"
#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

using namespace detail;

// -- backbone.split -------------------------------------------------------------

// One split point: the layer after which a stage ends. Returns the end (one
// past that layer), which must follow `previous_end`.
size_t split_point(const field& f, const std::vector<std::string>& layers, size_t previous_end) {
  // A stage must follow every split point, so the last layer is not one.
  std::vector<std::string> valid(layers.begin(), layers.end() - 1);
  std::string name = read_string(f);
  auto found = std::find(layers.begin(), layers.end(), name);
  auto end = static_cast<size_t>(found - layers.begin()) + 1;
  if (found == layers.end())
    f.fail(f.name() + " names unknown layer '" + name + "' (expected one of: " + join(valid)
           + ")");
  if (end == layers.size())
    f.fail(f.name() + " is '" + name + "', the last layer, so no stage would follow it "
           + "(expected one of: " + join(valid) + ")");
  if (end <= previous_end)
    f.fail(f.name() + " is '" + name + "', which does not come after '" + layers[previous_end - 1]
           + "' (expected split points in layer order: " + join(valid) + ")");
  return end;
}

// Stages from `backbone.split`: one ends after each listed layer, the last
// one ends with the backbone.
std::vector<stage_placement> make_stages(const field& split,
                                         const std::vector<std::string>& layers) {
  std::vector<size_t> ends;
  for (const field& f : split.items("a list of layer names, or auto", max_stages - 1))
    ends.push_back(split_point(f, layers, ends.empty() ? 0 : ends.back()));
  ends.push_back(layers.size());
  std::vector<stage_placement> stages;
  size_t begin = 0;
  for (size_t end : ends) {
    stages.push_back({"stage" + std::to_string(stages.size()), begin, end, ""});
    begin = end;
  }
  return stages;
}

// `split: auto`: `count` stages of (nearly) equal numbers of layers, the
// placeholder until the planner sets the boundaries at run time.
std::vector<stage_placement> even_stages(size_t count, size_t layers) {
  std::vector<stage_placement> stages;
  for (size_t k = 0; k < count; ++k)
    stages.push_back({"stage" + std::to_string(k), k * layers / count, (k + 1) * layers / count,
                      ""});
  return stages;
}

// How many stages `split: auto` plans: `backbone.stages`, else one per node
// `backbone.place` names (placing N stages asks for N), else 3; never more
// than there are layers, as a stage holds at least one.
size_t auto_stage_count(const std::optional<field>& count, const std::optional<field>& place,
                        size_t layers) {
  const std::string most = std::to_string(layers);
  std::optional<size_t> placed;
  if (place && place->node().IsSequence())
    placed = place->node().size();
  if (count) {
    auto n = read_integer<size_t>(
      *count, 1, std::min(layers, max_stages),
      layers <= max_stages ? "an integer from 1 to the backbone's " + most + " layers"
                           : "an integer from 1 to " + std::to_string(max_stages) + " ("
                               + at_most(max_stages, "stages") + "; the backbone has " + most
                               + " layers)");
    if (placed && *placed != n)
      count->fail(count->name() + " is " + std::to_string(n) + " but 'backbone.place' ("
                  + place->where() + ") names " + std::to_string(*placed)
                  + " nodes, one per stage (expected as many stages as nodes, or no 'stages': "
                  + "it defaults to the number of nodes placed)");
    return n;
  }
  if (!placed)
    return std::min<size_t>(3, layers);
  if (*placed < 1 || *placed > std::min(layers, max_stages))
    place->fail(place->name() + " names " + std::to_string(*placed)
                + " nodes, one per stage, but split: auto plans from 1 stage to one per layer ("
                + most + ")" + (layers > max_stages ? ", " + at_most(max_stages, "stages") : ""));
  return *placed;
}

// `backbone.split` (and `stages`): a list of layer names ending stages, or
// `auto` for boundaries the planner chooses at run time.
void parse_split(const field& section, const std::vector<std::string>& layers,
                 section_spec& s) {
  field split = section.section("split");
  std::optional<field> count = section.get("stages");
  s.split_auto = split.node().IsScalar() && split.node().Scalar() == "auto";
  if (count && !s.split_auto)
    count->fail(count->name() + " applies to split: auto only (a list of split points "
                "makes one stage more than it names)");
  if (s.split_auto)
    s.stages = even_stages(auto_stage_count(count, section.get("place"), layers.size()),
                           layers.size());
  else
    s.stages = make_stages(split, layers);
}

// A stage's place: a node name (every copy of the backbone there), or with
// `replicas` above 1 a list of them, one per copy.
void place_stage(const field& item, const topology& t, int32_t replicas, stage_placement& stage) {
  if (!item.node().IsSequence()) {
    stage.node = read_node(item, t.nodes);
    return;
  }
  const std::string expected = "a list of " + std::to_string(replicas) + " node names, one per "
                               "copy of the backbone (backbone.replicas)";
  if (replicas == 1)
    item.fail(item.name() + " is a list, but the backbone has one copy (expected a node name, "
              "or 'backbone.replicas' above 1 with one node per copy)");
  for (const field& n : item.items(expected, static_cast<size_t>(max_replicas)))
    stage.copy_nodes.push_back(read_node(n, t.nodes));
  if (stage.copy_nodes.size() != static_cast<size_t>(replicas))
    item.fail(item.name() + " names " + std::to_string(stage.copy_nodes.size()) + " nodes for " +
              std::to_string(replicas) + " copies of the backbone (expected " + expected + ")");
  stage.node = stage.copy_nodes.front();
}

void place_stages(const field& place, const topology& t, section_spec& s) {
  std::vector<field> items = place.items("a list of node names, one per stage", max_stages);
  for (size_t i = 0; i < items.size() && i < s.stages.size(); ++i)
    place_stage(items[i], t, s.replicas, s.stages[i]);
  if (items.size() != s.stages.size())
    place.fail(place.name() + " must name one node per stage: the backbone has "
               + std::to_string(s.stages.size()) + " stages, got "
               + std::to_string(items.size()) + " nodes");
}

// -- the feature cache ------------------------------------------------------------

// `backbone.cache`, `cache_mb` and `feature_block` (model::feature_cache_spec):
// a cache keeps rows only when they are computed in canonical blocks.
void parse_feature_cache(const field& section, model::feature_cache_spec& features) {
  if (auto f = section.get("cache"))
    features.cache = read_choice(*f, {"none", "memory"}) == "memory";
  read_if(section, "cache_mb", features.cache_mb, [](const field& f) {
    return read_number(f, "a number of MiB from 0 to 1048576",
                       [](double x) { return x >= 0 && x <= 1048576; });
  });
  read_if(section, "feature_block", features.block_rows, [](const field& f) {
    return read_integer<int64_t>(f, 0, 65536,
                                 "a number of rows from 0 (a microbatch in one forward) to 65536");
  });
  if (features.cache && features.block_rows < 1) {
    std::optional<field> block = section.get("feature_block");
    (block ? *block : section.require("cache"))
      .fail("'backbone.cache' is memory, which needs 'backbone.feature_block' >= 1 (rows "
            "computed in canonical blocks of K samples, so that a cached row equals a "
            "recomputed one), got " + std::to_string(features.block_rows));
  }
}

// The feature cache (and canonical blocks) live in the stage that takes the
// source's images and holds the whole backbone: its cache keys are the data
// set's sample ids, and its output rows are the heads' features, which
// --mode local computes the same way.
void check_feature_cache(const field& section, const section_spec& s) {
  if ((!s.features.cache && s.features.block_rows == 0) || s.stages.size() == 1)
    return;
  std::optional<field> key = section.get(s.features.cache ? "cache" : "feature_block");
  const std::string what = s.features.cache ? "'backbone.cache' is memory, which caches"
                                            : "'backbone.feature_block' computes";
  key->fail(what + " the features of the whole backbone in the one stage that holds it, but "
            "'backbone.split' cuts it into " + std::to_string(s.stages.size()) +
            " stages (expected split: [], or backbone.stages: 1 with split: auto)");
}

// `backbone.replicas`: copies of the backbone's stages, 1 to max_replicas.
// A cache is the one replica's: the samples of a data set would be dealt to
// a replica by their position in an epoch's shuffled order, so each copy
// would keep and miss others.
int32_t parse_replicas(const field& section, const section_spec& s) {
  std::optional<field> f = section.get("replicas");
  if (!f)
    return 1;
  auto n = read_integer<int32_t>(*f, 1, max_replicas,
                                 "a number of copies of the backbone from 1 to " +
                                   std::to_string(max_replicas));
  if (n > 1 && s.features.cache)
    f->fail(f->name() + " is " + std::to_string(n) + ", but 'backbone.cache' is memory: the "
            "cache is kept by the one copy of the backbone (each replica would keep and miss "
            "other samples' features; expected replicas: 1 with a cache)");
  return n;
}

// -- heads ---------------------------------------------------------------------------

// A head steps once per minibatch of features, counted from the training
// samples where the run is planned (schedule_length.hpp); `blame` is the
// section that asked.
void count_head_schedule(const field& blame, const model::optimizer_spec& o, topology& t) {
  const std::string where = t.optimizer_where.empty()
                              ? std::string{}
                              : " (the workload's optimizer section is at " +
                                  t.optimizer_where + ")";
  count_schedule_samples(blame, o, t, "job: transfer's heads" + where);
}

// A head `name` training `task` with the workload's optimizer.
head_placement make_head(const std::string& name, const model::task& task, const topology& t) {
  head_placement head;
  head.spec.name = name;
  head.spec.task_def = task;
  head.spec.model.name = "head";
  head.spec.model.classes = task.classes;
  // Derived from the name only, so adding a head does not change the others.
  head.spec.model.seed = model::derive_seed(t.seed, "head/" + name);
  head.spec.optimizer = t.optimizer.value_or(model::optimizer_spec{});
  return head;
}

head_placement parse_head(const field& item, topology& t) {
  check_section(item);
  const std::string name = read_new_name(item.require("name"), "head");
  head_placement head = make_head(name, read_task(item.require("task"), t), t);
  // The workload's optimizer (make_head), overridden by the head's own.
  auto own = item.get("optimizer");
  if (own)
    head.spec.optimizer = read_optimizer(*own, head.spec.optimizer);
  count_head_schedule(own ? *own : item, head.spec.optimizer, t);
  read_if(item, "node", head.node, [&](const field& f) { return read_node(f, t.nodes); });
  return head;
}

std::vector<head_placement> parse_heads(const field& list, topology& t) {
  std::vector<field> items =
    list.items("a list of heads ({name, task, node, optimizer})", max_heads);
  if (items.empty())
    list.fail(list.name() + " must list at least one head");
  std::vector<head_placement> heads;
  unique_names names("head");
  for (const field& item : items) {
    heads.push_back(parse_head(item, t));
    names.add(item.require("name"), heads.back().spec.name);
  }
  return heads;
}

// The width of the backbone's features, measured on the data's shape when
// its layers were listed: what every head takes. An error (a backbone whose
// output is not [N, features]) is reported on the key that chose the
// backbone.
int64_t backbone_features(const field& backbone, const topology& t) {
  if (t.backbone_features > 0)
    return t.backbone_features;
  std::optional<field> key = backbone.get(t.backbone.name == "torchscript" ? "path" : "model");
  (key ? *key : backbone).fail("job: transfer trains heads on the backbone's features, but " +
                               t.backbone_features_error);
}

// `runtime.head_threads`, read before the common runtime section is checked
// (which reports a runtime that is not a map).
int32_t parse_head_threads(const field& root) {
  std::optional<field> runtime = root.get("runtime");
  std::optional<field> f;
  if (runtime && runtime->node().IsMap())
    f = runtime->get("head_threads");
  return f ? read_compute_threads(*f) : 0;
}

// The heads take the features the backbone outputs, whatever their width.
job_reading parse(const field& root, const std::vector<std::string>& layers, topology& t) {
  field backbone = root.section("backbone");
  section_spec s;
  parse_split(backbone, layers, s);
  parse_feature_cache(backbone, s.features);
  check_feature_cache(backbone, s);
  s.replicas = parse_replicas(backbone, s);
  if (auto f = backbone.get("place"))
    place_stages(*f, t, s);
  if (s.features.cache && t.data.augment.any())
    backbone.require("cache").fail(model::augment_cache_refusal("backbone.cache"));
  // Without `heads:`, one head trains the workload's `task`, named after it:
  // a workload written for another strategy runs under transfer by
  // changing `job:` alone.
  // (With no task to train, `heads:` is required as before.)
  const model::task* task = t.find_task(t.task);
  if (auto heads = root.get("heads"); heads || task == nullptr)
    s.heads = parse_heads(root.require("heads"), t);
  else {
    s.heads = {make_head(t.task, *task, t)};
    count_head_schedule(root, s.heads.front().spec.optimizer, t);
  }
  const int64_t features = backbone_features(backbone, t);
  for (auto& head : s.heads)
    head.spec.model.features = features;
  s.head_threads = parse_head_threads(root);
  job_reading job;
  job.settings = std::move(s);
  return job;
}

} // namespace

const section_spec& section_of(const topology& t) {
  return std::any_cast<const section_spec&>(t.mode_spec);
}

section_spec& section_of(topology& t) {
  return std::any_cast<section_spec&>(t.mode_spec);
}

job_schema schema() {
  static const std::vector<std::string> optimizer = optimizer_keys();
  job_schema schema;
  schema.name = "transfer";
  schema.keys = {{"", {"heads"}},
                 {"backbone",
                  {"cache", "cache_mb", "feature_block", "split", "stages", "place", "replicas"}},
                 {"runtime", {"head_threads"}},
                 {"heads.*", {"name", "task", "node", "optimizer"}},
                 {"heads.*.optimizer", optimizer}};
  schema.lists = {"heads", "backbone.split", "backbone.place"};
  schema.readers = "jobs that run the backbone frozen";
  schema.reads_backbone_features = true; // the heads' input width
  schema.parse = parse;
  return schema;
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
