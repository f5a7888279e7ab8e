#include "actors/modes/data_parallel/freeze_section.hpp"

#include <algorithm>

#include "actors/modes/data_parallel/worker_layers.hpp"
#include "model/core/augment.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;

/// The keys only adaptive freezing reads.
const std::vector<std::string> adaptive_keys{"groups", "interval", "percentile", "max_frozen"};

/// The layers of the model a worker will hold, read without building it.
model::layer_listing worker_layers(const topology& t, const section_spec& s) {
  model::model_spec spec = t.backbone;
  const auto* task = t.find_task(s.task);
  spec.classes = task != nullptr ? task->classes : 10;
  return list_worker_layers(spec);
}

/// `task`: one of the topology's tasks.
std::string read_worker_task(const field& f, const topology& t) {
  std::vector<std::string> names;
  for (const auto& task : t.tasks)
    names.push_back(task.name);
  return read_choice(f, names);
}

/// Every layer but the classifier (the last): the layers that may be frozen.
std::vector<std::string> freezable_layers(const model::layer_listing& m) {
  return {m.names.begin(), m.names.end() - (m.names.empty() ? 0 : 1)};
}

/// The layers before and including `up_to` (model::freeze_point): a name
/// the settings read from freezable_layers.
size_t freeze_point(const model::layer_listing& m, const std::string& up_to) {
  return static_cast<size_t>(std::find(m.names.begin(), m.names.end(), up_to) -
                             m.names.begin()) + 1;
}

/// `freeze: {up_to: LAYER}`.
void read_fixed(const field& freeze, const std::vector<std::string>& layers,
                freeze_spec& out) {
  for (const auto& key : adaptive_keys)
    if (auto f = freeze.get(key))
      f->fail(f->name() + " is read with freeze.policy: adaptive only (a fixed prefix is "
              "freeze.up_to)");
  auto up_to = freeze.get("up_to");
  if (!up_to)
    freeze.fail(freeze.name() + " needs up_to: LAYER (the last frozen layer, one of: " +
                join(layers) + ") or policy: adaptive");
  out.up_to = read_choice(*up_to, layers);
}

/// `groups: [LAYER, ...]`: layers in model order, each after the previous.
std::vector<std::string> read_groups(const field& f, const std::vector<std::string>& layers) {
  std::vector<std::string> groups;
  for (const field& g : f.items("a list of layers, each the last of a freezable group",
                                layers.size())) {
    auto name = read_choice(g, layers);
    if (!groups.empty() && std::find(layers.begin(), layers.end(), name) <=
                             std::find(layers.begin(), layers.end(), groups.back()))
      g.fail(g.name() + " is '" + name + "', which does not come after '" + groups.back() +
             "' (expected the groups in model order: " + join(layers) + ")");
    groups.push_back(name);
  }
  if (groups.empty())
    f.fail(f.name() + " is empty (expected at least one layer)");
  return groups;
}

/// `freeze: {policy: adaptive, interval, percentile, max_frozen, groups}`.
void read_adaptive(const field& freeze, const std::vector<std::string>& layers,
                   const topology& t, freeze_spec& out) {
  if (auto f = freeze.get("up_to"))
    f->fail(f->name() + " fixes the frozen prefix, but freeze.policy is adaptive (remove one)");
  out.groups = default_freeze_groups(t.backbone.name);
  if (auto f = freeze.get("groups"))
    out.groups = read_groups(*f, layers);
  else if (out.groups.empty())
    freeze.fail(freeze.name() + " has no default groups for model '" + t.backbone.name +
                "' (expected groups: [LAYER, ...], layers of: " + join(layers) + ")");
  read_if(freeze, "interval", out.adaptive.interval, positive_int32);
  read_if(freeze, "percentile", out.adaptive.percentile, [](const field& f) {
    return read_number(f, "a percentile in [0, 100]", [](double x) { return x >= 0 && x <= 100; });
  });
  if (auto f = freeze.get("max_frozen")) {
    auto last = read_choice(*f, out.groups);
    out.adaptive.max_frozen =
      static_cast<int32_t>(std::find(out.groups.begin(), out.groups.end(), last) -
                           out.groups.begin()) + 1;
  }
}

/// The largest prefix the settings may freeze: what a cache must hold.
size_t largest_point(const model::layer_listing& m, const freeze_spec& s) {
  if (s.policy == "fixed")
    return freeze_point(m, s.up_to);
  const auto most = s.adaptive.max_frozen < 0 ? s.groups.size()
                                              : static_cast<size_t>(s.adaptive.max_frozen);
  return freeze_point(m, s.groups[most - 1]);
}

/// `cache: memory|none` and `cache_mb`: refused over a prefix whose output
/// depends on the rest of the batch, as the reference refuses it.
void read_cache(const field& freeze, const model::layer_listing& m, freeze_spec& out) {
  read_if(freeze, "cache_mb", out.cache_mb, [](const field& f) {
    return read_number(f, "a number of MiB in (0, 1048576]",
                       [](double x) { return x > 0 && x <= 1048576; });
  });
  auto f = freeze.get("cache");
  if (!f || read_choice(*f, {"memory", "none"}) == "none")
    return;
  out.cache = true;
  const auto point = largest_point(m, out);
  const auto dependent = std::find_if(
    m.batch_dependent.begin(), m.batch_dependent.end(),
    [&](const std::string& name) { return freeze_point(m, name) <= point; });
  if (dependent != m.batch_dependent.end())
    f->fail(f->name() + " is 'memory', but frozen layer '" + *dependent +
            "' normalises over the batch (batch norm without running statistics): its output "
            "cannot be cached per sample (freeze before it or set cache: none)");
}

/// `backbone.checkpoint` loads every layer but the classifier: the mlp has
/// no backbone.
void check_checkpoint(const field& root, const topology& t) {
  if (t.checkpoint.empty() || (t.backbone.name != "mlp" && t.backbone.name != "ist_mlp"))
    return;
  auto backbone = root.section("backbone");
  auto key = backbone.get("checkpoint");
  (key ? *key : root).fail("backbone.checkpoint loads a pretrained backbone, but the mlp has "
                           "none (expected checkpoint: none, or data_parallel.model convnet or "
                           "resnet18)");
}

/// Local SGD and adaptive freezing exchange over the ring only; AutoFreeze
/// decides on every step's all-reduced gradient, which local SGD has not.
void check_combinations(const field& root, const field& section, const topology& t,
                        const section_spec& s) {
  if (!t.checkpoint.empty() && s.exchange == "ps") {
    auto key = root.section("backbone").get("checkpoint");
    (key ? *key : root).fail("backbone.checkpoint: the parameter shards start from the seeded "
                             "weights, not a pretrained backbone (expected exchange: ring or "
                             "checkpoint: none)");
  }
  if (s.sync_every > 0 && s.exchange == "ps")
    section.require("sync_every").fail("data_parallel.sync_every (local SGD) averages over the "
                                       "ring: it needs exchange: ring, not ps");
  if (s.freeze.policy != "adaptive")
    return;
  auto policy = section.require("freeze").require("policy");
  if (s.sync_every > 0)
    policy.fail("adaptive freezing decides on every step's all-reduced gradients: it needs "
                "sync_every: 0 (got " + std::to_string(s.sync_every) + ")");
  if (s.exchange == "ps")
    policy.fail("adaptive freezing decides on the ring's all-reduced gradients: it needs "
                "exchange: ring, not ps");
}

} // namespace

std::vector<std::string> default_freeze_groups(const std::string& model) {
  if (model == "convnet")
    return {"pool1", "pool2", "pool3", "relu6"};
  if (model == "resnet18")
    return {"layer1_1", "layer2_1", "layer3_1", "layer4_1"};
  if (model == "mlp")
    return {"relu1", "relu2"};
  return {};
}

const std::vector<std::string>& freeze_keys() {
  static const std::vector<std::string> keys{"policy",     "up_to",      "groups", "interval",
                                             "percentile", "max_frozen", "cache",  "cache_mb"};
  return keys;
}

void read_freezing(const field& root, const field& section, const topology& t,
                   section_spec& s) {
  s.task = t.task;
  read_if(section, "task", s.task, [&](const field& f) { return read_worker_task(f, t); });
  read_if(section, "sync_every", s.sync_every, [](const field& f) {
    return read_integer<int32_t>(f, 0, 1000000,
                                 "a number of steps from 0 (every step's gradients all-reduced) "
                                 "to 1000000");
  });
  check_checkpoint(root, t);
  auto freeze = section.get("freeze");
  if (freeze && !freeze->is_null()) {
    check_section(*freeze);
    const auto m = worker_layers(t, s);
    const auto layers = freezable_layers(m);
    s.freeze.policy = "fixed";
    if (auto policy = freeze->get("policy"))
      s.freeze.policy = read_choice(*policy, {"fixed", "adaptive"});
    if (s.freeze.policy == "fixed")
      read_fixed(*freeze, layers, s.freeze);
    else
      read_adaptive(*freeze, layers, t, s.freeze);
    read_cache(*freeze, m, s.freeze);
    if (s.freeze.cache && t.data.augment.any())
      freeze->require("cache").fail(model::augment_cache_refusal("data_parallel.freeze.cache"));
  }
  check_combinations(root, section, t, s);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
