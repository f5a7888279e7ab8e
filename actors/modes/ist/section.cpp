#include "actors/modes/ist/section.hpp"

#include <algorithm>
#include <optional>

#include "actors/config/section_optimizer.hpp"
#include "actors/modes/one_task.hpp"
#include "model/core/error.hpp"
#include "model/ist/epoch_steps.hpp"
#include "model/ist_mlp/mlp_layers.hpp"
#include "model/ist_mlp/network.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace {

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;

/// Which networks the two kinds take, and why: an error about a model says it.
const char* ist_models =
  "job: ist trains mlp with kind ist (it partitions the hidden neurons of an mlp's fully "
  "connected layers among the workers) and resnet18 with kind resist (it deals the residual "
  "blocks of a ResNet to the workers); no other model can be cut that way";

/// `ist.model`: the network of `kind` (mlp for ist, resnet18 for resist),
/// which is also its default.
void check_model(const field& section, const std::string& kind) {
  auto f = section.get("model");
  if (!f)
    return;
  const std::string expected = kind == "resist" ? "resnet18" : "mlp";
  const auto model = read_string(*f);
  if (model != "mlp" && model != "resnet18")
    f->fail(f->name() + " is '" + model + "', but " + ist_models + " (expected " + expected +
            ")");
  if (model != expected)
    f->fail(f->name() + " is " + model + ", but ist.kind " + kind + " trains " + expected +
            " (" + ist_models + "; expected " + expected +
            (kind == "resist" ? ", or kind: ist)" : ", or kind: resist)"));
}

/// `ist.hidden`: one positive width per hidden layer, each at least W and S
/// (every worker and every shard gets a neuron of every layer).
std::vector<int64_t> read_hidden(const field& f, const section_spec& s) {
  const std::string what = "a list of hidden layer widths, e.g. [4096] or [4096, 4096]";
  std::vector<int64_t> widths;
  for (const field& item : f.items(what, model::ist::max_hidden_layers)) {
    auto width = read_integer<int64_t>(
      item, 1, model::ist::max_width, "a width from 1 to " + std::to_string(model::ist::max_width));
    if (width < s.workers || width < s.shards)
      item.fail(item.name() + " is " + std::to_string(width) + ": every hidden layer needs at "
                "least one neuron per worker and per shard (expected at least " +
                std::to_string(std::max(s.workers, s.shards)) + ")");
    widths.push_back(width);
  }
  if (widths.empty())
    f.expected(what);
  return widths;
}

/// `ist.nodes`: one node per worker.
std::vector<std::string> read_nodes(const field& f, const topology& t, int32_t workers) {
  std::vector<std::string> nodes;
  for (const field& n : f.items("a list of node names, one per worker",
                                static_cast<size_t>(max_workers)))
    nodes.push_back(read_node(n, t.nodes));
  if (nodes.size() != static_cast<size_t>(workers))
    f.fail(f.name() + " names " + std::to_string(nodes.size()) + " nodes for " +
           std::to_string(workers) + " workers (expected one node per worker)");
  return nodes;
}

int32_t read_count(const field& f) {
  return read_integer<int32_t>(f, 1, max_workers,
                               "a number from 1 to " + std::to_string(max_workers));
}

/// Batch norm with batch statistics needs two samples per minibatch.
void check_batch(const field& root, const topology& t) {
  if (t.plan.batch_size >= 2)
    return;
  auto key = root.section("data").get("batch_size");
  (key ? *key : root).fail("data.batch_size is " + std::to_string(t.plan.batch_size) +
                           ": job: ist normalises each minibatch with its own statistics "
                           "(expected at least 2)");
}

/// The shards make the initial network from the seed: a pretrained
/// backbone would be silently left unread.
void check_checkpoint(const field& root, const topology& t) {
  if (t.checkpoint.empty())
    return;
  auto key = root.section("backbone").get("checkpoint");
  (key ? *key : root).fail("backbone.checkpoint names a pretrained backbone, but job: ist's "
                           "shards make their initial network from the seed and read none "
                           "(expected checkpoint: none)");
}

// `ist:` (job: ist only; absent: every default).
/// The workload's `optimizer:`, or its older name `ist.optimizer` (over
/// the authors' plain SGD), not both. IST's local steps are SGD's with a
/// fresh momentum every round (model/ist/ist.hpp), each at its step's lr of
/// the schedule: adam's moments and clipping are refused, with the reason.
void read_optimizer_of(const field& root, const field& section, const topology& t,
                       section_spec& s) {
  auto read = read_section_optimizer(root, section, t, s.optimizer);
  s.optimizer = read.optimizer;
  const field& blame = read.given ? *read.given : section;
  const auto& o = s.optimizer;
  auto refuse = [&](const std::string& what) {
    blame.fail(blame.name() + ": " + what + " (IST and ResIST take plain SGD steps, with a "
               "fresh optimizer every round as the authors do; expected name: sgd, no "
               "nesterov, no clip_grad_norm)");
  };
  if (o.name != "sgd")
    refuse(o.name + " is not supported: its moments would restart every round");
  if (o.nesterov)
    refuse("nesterov is not supported");
  if (o.clip_grad_norm > 0)
    refuse("clip_grad_norm is not supported: a worker holds only its subnet's gradient");
}

/// The rounds of the job (its steps for faults) when its training set's
/// size is known here (a synthetic set) or bounded (data.train_limit).
std::optional<job_length> length_of(const topology& t, const section_spec& s) {
  const int64_t samples = t.data.train_samples_bound();
  if (samples <= 0)
    return std::nullopt;
  try {
    auto steps = model::ist::steps_per_epoch(samples, t.plan.batch_size, s.workers);
    const int64_t per_epoch = model::ist::rounds_per_epoch(steps, s.local_steps);
    return job_length{t.plan.epochs * per_epoch,
                      epochs_text(t.plan.epochs) + " x " + std::to_string(per_epoch)
                        + " rounds of " + std::to_string(s.local_steps) + " local steps from "
                        + std::to_string(samples) + " training samples",
                      "round"};
  } catch (const model::error&) {
    return std::nullopt; // too little data: the workers say so when they load it
  }
}

/// Faults and checkpoints count rounds (the job's step): workers and shards
/// throw and checkpoint at rounds, nodes are killed or stopped after one.
/// Its actors send no microbatches through a fanout: no delay or drop.
job_reading parse(const field& root, const std::vector<std::string>&, topology& t) {
  read_one_task_heads(root, t);
  field section = root.section("ist");
  section_spec s;
  if (!section.is_null())
    check_section(section);
  read_if(section, "kind", s.kind,
          [](const field& f) { return read_choice(f, {"ist", "resist"}); });
  check_model(section, s.kind);
  read_if(section, "workers", s.workers, read_count);
  s.shards = s.workers;
  read_if(section, "shards", s.shards, read_count);
  read_if(section, "local_steps", s.local_steps, positive_int32);
  if (auto f = section.get("hidden")) {
    if (s.kind == "resist")
      f->fail(f->name() + " is given, but ist.kind is resist: ResIST trains resnet18, whose "
              "widths are fixed (expected no hidden, or kind: ist)");
    s.hidden = read_hidden(*f, s); // the default [4096] is wider than 64 workers
  }
  read_optimizer_of(root, section, t, s);
  check_batch(root, t);
  check_checkpoint(root, t);
  s.nodes.resize(static_cast<size_t>(s.workers));
  if (auto f = section.get("nodes"))
    s.nodes = read_nodes(*f, t, s.workers);
  // The job trains its own network: the backbone section's model is not used.
  t.backbone.name = s.kind == "resist" ? "resnet18" : "mlp";
  if (s.kind == "ist") { // the mlp cut into subnets: data-parallel's ist_mlp
    t.trained_network = t.backbone;
    t.trained_network->name = model::ist::mlp_name;
    t.trained_network->hidden = s.hidden;
  }
  t.trained_optimizer = s.optimizer;
  job_reading job;
  job.own_length = true;
  job.length = length_of(t, s);
  job.refuses_edge_faults =
    "its workers and shards exchange subnets, not microbatches on credit edges";
  job.settings = std::move(s);
  return job;
}

} // namespace

const section_spec& section_of(const topology& t) {
  return std::any_cast<const section_spec&>(t.mode_spec);
}

const std::string& shard_node(const section_spec& s, int32_t shard) {
  return s.nodes.at(static_cast<size_t>(shard % s.workers));
}

std::vector<strategy_variant> variants() {
  strategy_variant ist{"ist", "independent subnets: each of W workers trains a disjoint part of "
                              "every hidden layer for L local steps",
                       {"ist.workers={W}"}};
  ist.splits_batch = true;
  return {ist};
}

job_schema schema() {
  job_schema schema;
  schema.name = "ist";
  schema.section = "ist";
  schema.keys = {{"ist", {"kind", "model", "workers", "shards", "local_steps", "hidden",
                          "optimizer", "nodes"}},
                 {"ist.optimizer", optimizer_keys()}};
  schema.lists = {"ist.hidden", "ist.nodes"};
  // The network is ist.model's: the backbone's model keys are not read.
  const std::string own = std::string(ist_models) + " (expected ist.model instead)";
  schema.refusals = {{"backbone.model", own}, {"backbone.path", own},
                     {"backbone.wide_features", own}};
  add_one_task_heads(schema);
  schema.parse = parse;
  schema.own_model = true;
  schema.trains = "IST trains an mlp, ist_mlp in data_parallel.model, or a resnet18";
  schema.reads_data_on = "each worker reads its shard of them on its own node";
  return schema;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
