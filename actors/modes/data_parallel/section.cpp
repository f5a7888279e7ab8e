#include "actors/modes/data_parallel/section.hpp"

#include <algorithm>
#include <optional>

#include "actors/config/section_optimizer.hpp"
#include "actors/modes/batch_norm.hpp"
#include "actors/modes/data_parallel/freeze_section.hpp"
#include "actors/modes/one_task.hpp"
#include "model/ist_mlp/network.hpp"
#include "model/data_parallel/worker_data.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;

/// The models a worker can hold whole: built by make_worker_model
/// (a torchscript backbone is backbone.path's file).
const std::vector<std::string> worker_models{"mlp", "ist_mlp", "convnet", "resnet18",
                                             "torchscript"};

/// An optimizer section's keys and the large-minibatch ones.
std::vector<std::string> with_schedule_keys(std::vector<std::string> keys) {
  keys.push_back("lr_scaling");
  keys.push_back("base_batch");
  return keys;
}

/// The large-minibatch keys of the optimizer section.
void read_schedule(const field& section, section_spec& s) {
  read_if(section, "lr_scaling", s.lr_scaling,
          [](const field& f) { return read_choice(f, {"none", "linear"}); });
  read_if(section, "base_batch", s.base_batch, positive_int64);
  read_if(section, "warmup_epochs", s.warmup_epochs, [](const field& f) {
    return read_number(f, "a number of epochs in [0, 1000]",
                       [](double x) { return x >= 0 && x <= 1000; });
  });
}

/// The workload's `optimizer:`, or its older name `data_parallel.optimizer`
/// (over backbone.pretrain.optimizer, as before the workload's section), not
/// both; lr_scaling and base_batch are read from whichever is given.
void read_optimizer_of(const field& root, const field& section, const topology& t,
                       section_spec& s) {
  auto read = read_section_optimizer(root, section, t, t.pretrain.optimizer);
  s.optimizer = read.optimizer;
  if (read.given)
    read_schedule(*read.given, s);
  s.warmup_epochs = s.optimizer.warmup_epochs;
  // A worker's step covers its whole trainable part: the ring, local SGD
  // and the reference clip over it. A parameter shard holds only its key
  // range, so the global norm would need a round the protocol does not have.
  if (s.optimizer.clip_grad_norm > 0 && s.exchange == "ps")
    (read.given ? *read.given : section)
      .fail("clip_grad_norm needs the norm of the whole gradient, which no parameter shard "
            "has (data_parallel.exchange: ps); expected no clip_grad_norm, or exchange: ring");
}

/// `data_parallel.model`, else `backbone.model` when a worker can hold it.
/// The workers train one model: given in both places, the two must agree
/// (a backbone.model the job would not train is refused, not ignored), and
/// torchscript is named by backbone.model, beside its backbone.path.
std::string read_model(const field& section, const field& root, const topology& t) {
  auto backbone = root.section("backbone").get("model");
  auto own = section.get("model");
  if (!own) {
    if (contains(worker_models, t.backbone.name))
      return t.backbone.name;
    (backbone ? *backbone : root)
      .fail("job: data-parallel trains a whole model of " + join(worker_models) +
            ", but backbone.model is '" + t.backbone.name + "' (set data_parallel.model)");
  }
  const std::string model = read_choice(*own, worker_models);
  if (backbone && model != t.backbone.name)
    own->fail(own->name() + " is " + model + ", but backbone.model (" + backbone->where() +
              ") is " + t.backbone.name + ": the workers train one model (name it once, or "
              "the same in both)");
  if (model == "torchscript" && t.backbone.name != "torchscript")
    own->fail(own->name() + " is torchscript, whose file is backbone.path: set backbone.model: "
              "torchscript and backbone.path");
  return model;
}

/// `data_parallel.hidden`: ist_mlp's hidden widths (job: ist's `ist.hidden`
/// limits), read with model: ist_mlp only; absent: model_spec's default.
void read_hidden(const field& section, topology& t) {
  auto f = section.get("hidden");
  if (!f)
    return;
  if (t.backbone.name != "ist_mlp")
    f->fail(f->name() + " is read with data_parallel.model: ist_mlp only (the model is '" +
            t.backbone.name + "')");
  const std::string what = "a list of hidden layer widths, e.g. [4096] or [4096, 4096]";
  std::vector<int64_t> widths;
  for (const field& item : f->items(what, model::ist::max_hidden_layers))
    widths.push_back(read_integer<int64_t>(
      item, 1, model::ist::max_width, "a width from 1 to " + std::to_string(model::ist::max_width)));
  if (widths.empty())
    f->expected(what);
  t.backbone.hidden = std::move(widths);
}

/// The worker models with batch norm (make_worker_model's mlp and
/// ist_mlp: BatchNorm1d on batch statistics; resnet18: BatchNorm2d).
const std::vector<std::string> batch_norm_models{"mlp", "ist_mlp", "resnet18"};

/// A worker's minibatches are data.batch_size samples of its share of the
/// epoch (padded to W equal shares), the last one what remains: with batch
/// norm each needs at least 2 samples (actors/modes/batch_norm.hpp).
void check_batch_norm(const field& root, const topology& t, int32_t workers) {
  if (!contains(batch_norm_models, t.backbone.name))
    return;
  const std::string model = "model '" + t.backbone.name + "'";
  const int64_t batch = t.plan.batch_size;
  refuse_batch_norm_step(data_key_or_root(root, "batch_size"), batch,
                         "data.batch_size is " + std::to_string(batch) +
                           " sample per worker step",
                         model);
  const auto samples = known_training_samples(t);
  if (!samples || *samples <= 0)
    return;
  const int64_t share = (*samples + workers - 1) / workers;
  const char* key = t.data.train_samples_key();
  if (share % batch == 1)
    refuse_batch_norm_step(data_key_or_root(root, key), 1,
                           std::to_string(*samples) + " training samples give each of " +
                             std::to_string(workers) + " workers " + std::to_string(share) +
                             " per epoch, whose last minibatch of data.batch_size " +
                             std::to_string(batch) + " has 1 sample",
                           model);
}

/// `data_parallel.exchange`: ring (all-reduce) or ps (parameter shards).
std::string read_exchange(const field& f) {
  return read_choice(f, {"ring", "ps"});
}

/// `data_parallel.nodes` (one node per worker) or `shard_nodes` (per shard).
std::vector<std::string> read_nodes(const field& f, const topology& t, int32_t count,
                                    const std::string& what = "worker") {
  std::vector<std::string> nodes;
  for (const field& n : f.items("a list of node names, one per " + what,
                                static_cast<size_t>(max_workers)))
    nodes.push_back(read_node(n, t.nodes));
  if (nodes.size() != static_cast<size_t>(count))
    f.fail(f.name() + " names " + std::to_string(nodes.size()) + " nodes for " +
           std::to_string(count) + " " + what + "s (expected one node per " + what + ")");
  return nodes;
}

/// The parameter server's keys (`shards`, `max_staleness`, `shard_nodes`):
/// read with exchange: ps only.
void read_ps(const field& section, const topology& t, section_spec& s) {
  if (s.exchange != "ps") {
    for (const char* key : {"shards", "max_staleness", "shard_nodes"})
      if (auto f = section.get(key))
        f->fail(f->name() + " is read with data_parallel.exchange: ps only (the exchange is '" +
                s.exchange + "')");
    return;
  }
  read_if(section, "shards", s.shards, [](const field& f) {
    return read_integer<int32_t>(f, 1, max_shards,
                                 "a number of shards from 1 to " + std::to_string(max_shards));
  });
  read_if(section, "max_staleness", s.max_staleness, [](const field& f) {
    return read_integer<int32_t>(f, 0, 1000000, "a number of steps >= 0 (0: BSP)");
  });
  s.shard_nodes.resize(static_cast<size_t>(s.shards));
  if (auto f = section.get("shard_nodes"))
    s.shard_nodes = read_nodes(*f, t, s.shards, "shard");
}

/// The job's steps (its W workers step together) when its training set's
/// size is known here (a synthetic set) or bounded (data.train_limit):
/// epochs x steps per epoch.
std::optional<job_length> length_of(const topology& t, int32_t workers) {
  const int64_t samples = t.data.train_samples_bound();
  if (samples <= 0)
    return std::nullopt;
  try {
    const int64_t per_epoch = model::data_parallel_steps_per_epoch(
      samples, workers, t.plan.batch_size, model::remainder_policy::pad);
    return job_length{t.plan.epochs * per_epoch,
                      epochs_text(t.plan.epochs) + " x " + std::to_string(per_epoch)
                        + " steps of " + std::to_string(workers) + " workers x "
                        + std::to_string(t.plan.batch_size) + " samples from "
                        + std::to_string(samples) + " training samples"};
  } catch (const model::error&) {
    return std::nullopt; // too little data: the workers say so when they load it
  }
}

/// Faults and checkpoints count global steps: workers and shards throw and
/// checkpoint at steps, nodes are killed or stopped after one. What recovery
/// cannot make exact yet is refused: bounded staleness (a worker's
/// checkpoint would not be a cut of the shards') and adaptive freezing (its
/// change-rate sums are not checkpointed). Ring chunks and the shards'
/// pushes and pulls go through no credit edge: no delay or drop.
job_reading reading_of(const topology& t, section_spec s) {
  job_reading job;
  job.own_length = true;
  job.length = length_of(t, s.workers);
  if (s.max_staleness > 0)
    job.refuses_recovery.push_back(
      {"data_parallel.max_staleness",
       "with max_staleness " + std::to_string(s.max_staleness) +
         ": job: data-parallel recovers from faults under BSP only (a worker's checkpoint is a "
         "cut of the shards' only then; expected 0)"});
  if (s.freeze.policy == "adaptive")
    job.refuses_recovery.push_back(
      {"data_parallel.freeze.policy", "with adaptive freezing: its interval's gradient sums are "
                                      "not checkpointed (expected freeze.policy none or fixed)"});
  job.refuses_edge_faults = "ring chunks and the shards' pushes and pulls use no credit edge";
  job.settings = std::move(s);
  return job;
}

// `data_parallel:` (job: data-parallel only; absent: every default).
job_reading parse(const field& root, const std::vector<std::string>&, topology& t) {
  read_one_task_heads(root, t);
  field section = root.section("data_parallel");
  section_spec s;
  if (!section.is_null())
    check_section(section);
  read_if(section, "workers", s.workers, [](const field& f) {
    return read_integer<int32_t>(f, 1, max_workers,
                                 "a number of workers from 1 to " + std::to_string(max_workers));
  });
  read_if(section, "exchange", s.exchange, read_exchange);
  read_ps(section, t, s);
  read_if(section, "bucket_mb", s.bucket_mb, [](const field& f) {
    return read_number(f, "a number of MiB in (0, 1024]",
                       [](double x) { return x > 0 && x <= 1024; });
  });
  read_if(section, "overlap", s.overlap, [](const field& f) {
    return read_choice(f, {"true", "false"}) == "true";
  });
  t.backbone.name = read_model(section, root, t);
  read_hidden(section, t);
  check_batch_norm(root, t, s.workers);
  read_freezing(root, section, t, s);
  read_optimizer_of(root, section, t, s);
  t.trained_optimizer = s.optimizer;
  s.nodes.resize(static_cast<size_t>(s.workers));
  if (auto f = section.get("nodes"))
    s.nodes = read_nodes(*f, t, s.workers);
  return reading_of(t, std::move(s));
}

} // namespace

const section_spec& section_of(const topology& t) {
  return std::any_cast<const section_spec&>(t.mode_spec);
}

std::vector<strategy_variant> variants() {
  strategy_variant local{"local", "one process, every core: the global batch per step (the "
                                  "ring's steps; OpenBLAS's sums in its order on every core)",
                         {"data_parallel.workers={W}", "data_parallel.exchange=ring"}};
  local.local = true;
  strategy_variant ring{"data-parallel:ring",
                        "W workers, gradients all-reduced over a ring every step",
                        {"data_parallel.workers={W}", "data_parallel.exchange=ring"}};
  strategy_variant ps{"data-parallel:ps",
                      "W workers, gradients pushed to W parameter shards, weights pulled, every "
                      "step",
                      {"data_parallel.workers={W}", "data_parallel.exchange=ps",
                       "data_parallel.shards={W}"}};
  // Local SGD's L, when the workload's section names none: 8.
  strategy_variant local_sgd{"data-parallel:local-sgd",
                             "W workers, own steps, weights averaged every L steps",
                             {"data_parallel.workers={W}", "data_parallel.exchange=ring"},
                             "{sync_every: 8}", {"sync_every"}};
  strategy_variant adaptive{"fine-tune:adaptive",
                            "the ring with AutoFreeze: converged blocks freeze, their gradients "
                            "leave the ring",
                            {"data_parallel.workers={W}", "data_parallel.exchange=ring",
                             "data_parallel.freeze.policy=adaptive"},
                            "", {"freeze"}};
  std::vector<strategy_variant> out{local, ring, ps, local_sgd, adaptive};
  for (auto& v : out)
    v.splits_batch = true;
  return out;
}

job_schema schema() {
  job_schema schema;
  schema.name = "data-parallel";
  schema.section = "data_parallel";
  schema.keys = {{"data_parallel", {"workers", "exchange", "bucket_mb", "overlap", "model",
                                    "optimizer", "nodes", "shards", "max_staleness",
                                    "shard_nodes", "sync_every", "freeze", "task", "hidden"}},
                 {"data_parallel.freeze", freeze_keys()},
                 {"data_parallel.optimizer", with_schedule_keys(optimizer_keys())},
                 {"optimizer", {"lr_scaling", "base_batch"}}};
  schema.lists = {"data_parallel.nodes", "data_parallel.shard_nodes", "data_parallel.hidden",
                  "data_parallel.freeze.groups"};
  add_one_task_heads(schema);
  schema.parse = parse;
  schema.own_model = true;
  schema.reads_data_on = "each worker reads its shard of them on its own node";
  return schema;
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
