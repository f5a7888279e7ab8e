// The workload's sections: the seed, the data (data_reader.cpp), the
// tasks, the backbone (its layer names and ties from model::list_layers:
// the reader includes no LibTorch frontend header), the trained task, the
// target accuracy and which epoch is kept.

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/config/section_fields.hpp"
#include "actors/config/topology_parts.hpp"
#include "model/core/architecture.hpp"
#include "model/core/batches.hpp"
#include "model/core/error.hpp"
#include "model/core/layer_listing.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace config {

namespace fs = std::filesystem;
using namespace detail;

namespace {

// The checkpoint path, or "" for none: `none`, an empty string or no value
// (the backbone keeps its seeded initial weights, as speed tests want).
std::string read_checkpoint(const field& f) {
  if (f.is_null() || (f.node().IsScalar() && f.node().Scalar().empty()))
    return "";
  return read_string(f) == "none" ? std::string{} : read_path(f);
}

} // namespace

namespace {

// A task entry as it is read: the dataset's classes bound its labels.
struct task_reading {
  int64_t classes;
  const std::string& dataset;
  std::string name;
  std::vector<int64_t> labels;
};

// A task maps each class of the dataset to a task class: the map has one
// entry per dataset class (a shorter one would index past its end) and the
// task has at most as many classes (a task class of 99 would make a 100-way
// head that never sees 90 of them, 1e8 a 51 GB one). The size is checked
// before any entry is read.
void read_labels(const field& labels, const field&, task_reading& task) {
  const std::string count = std::to_string(task.classes);
  const std::string& dataset = task.dataset;
  if (labels.node().IsSequence() && labels.node().size() != static_cast<size_t>(task.classes))
    labels.fail(labels.name() + " must map the " + count + " classes of " + dataset + ", got "
                + std::to_string(labels.node().size()) + " labels");
  const std::string what = "a task class from 0 to " + std::to_string(task.classes - 1) + " ("
                           + dataset + " has " + count + " classes; a task has at most as many)";
  for (const field& label : labels.items("a list of task classes, one per dataset class",
                                         static_cast<size_t>(task.classes)))
    task.labels.push_back(read_integer<int64_t>(label, 0, task.classes - 1, what));
  if (task.labels.empty()) // `labels: []` or `labels:` with nothing
    labels.fail(labels.name() + " must map the " + count + " classes of " + dataset
                + ", got no labels");
}

const section_fields<task_reading>& task_fields() {
  static const section_fields<task_reading> fields{{
    {"name", [](const field& f, const field&,
                task_reading& task) { task.name = read_new_name(f, "task"); },
     true},
    {"labels", read_labels, true},
  }};
  return fields;
}

model::task parse_task(const field& item, int64_t classes, const std::string& dataset) {
  task_reading task{classes, dataset, {}, {}};
  task_fields().read(item, task);
  try {
    return model::make_task(task.name, task.labels);
  } catch (const model::error& e) {
    item.require("labels").fail(e.what());
  }
}

std::vector<model::task> parse_tasks(const field& list, int64_t classes,
                                     const std::string& dataset) {
  std::vector<model::task> tasks;
  unique_names names("task");
  for (const field& item : list.items("a list of tasks ({name, labels})", max_tasks)) {
    tasks.push_back(parse_task(item, classes, dataset));
    names.add(item.require("name"), tasks.back().name);
  }
  return tasks;
}

// `backbone.pretrain`: how the starting weights are made when missing.
const section_fields<topology>& pretrain_fields() {
  static const section_fields<topology> fields{{
    {"task", [](const field& f, const field&,
                topology& t) { t.pretrain.task = read_task(f, t).name; }},
    {"epochs", [](const field& f, const field&,
                  topology& t) { t.pretrain.epochs = positive_int32(f); }},
    {"train_limit", [](const field& f, const field&,
                       topology& t) { t.pretrain.train_limit = non_negative_int64(f); }},
    // A per-part override over the workload's optimizer section.
    {"optimizer", [](const field& f, const field&, topology& t) {
       t.pretrain.optimizer = read_optimizer(f, t.pretrain.optimizer);
     }},
    {"if_missing", [](const field& f, const field&, topology& t) {
       t.pretrain.if_missing_pretrain = read_choice(f, {"error", "pretrain"}) == "pretrain";
     }},
  }};
  return fields;
}

// The backbone's layer names, which a strategy's keys name, its ties and,
// for a job that reads it, the width of its features.
std::vector<std::string> layer_names(const model::model_spec& spec, const field& blame,
                                     topology& t) {
  const auto features = t.schema->reads_backbone_features ? model::with_features::yes
                                                          : model::with_features::no;
  model::layer_listing layers;
  try {
    layers = model::list_layers(spec, features);
  } catch (const std::exception& e) { // model::error, and anything LibTorch's loader throws
    blame.fail("cannot build the backbone: " + std::string(e.what()));
  }
  if (layers.names.empty())
    blame.fail("the backbone has no layers (a TorchScript backbone's top-level children are "
               "its layers)");
  t.backbone_ties = std::move(layers.ties);
  t.backbone_features = layers.features;
  t.backbone_features_error = std::move(layers.features_error);
  return layers.names;
}

// `backbone.KEY` describes the model `model` only: with another it would be
// ignored, so it is refused.
void refuse_other_model(const field& f, const std::string& model, const topology& t) {
  if (t.backbone.name != model)
    f.fail(f.name() + " is read with backbone.model: " + model + " only (the model is '" +
           t.backbone.name + "')");
}

// A TorchScript backbone is a file that exists.
void check_torchscript(const field& section, topology& t) {
  if (t.backbone.name != "torchscript")
    return;
  std::optional<field> path = section.get("path");
  if (!path)
    section.require("model").fail("'backbone.model' is torchscript but 'backbone.path' is not "
                                  "given");
  if (!fs::exists(t.backbone.path))
    path->fail("'backbone.path' names '" + path->node().Scalar() + "', but '" + t.backbone.path
               + "' does not exist");
}

// The model and its files.
const section_fields<topology>& backbone_fields() {
  static const section_fields<topology> fields{
    {
      {"model", [](const field& f, const field&, topology& t) {
         t.backbone.name = read_choice(f, model::backbone_models());
       }},
      {"path", [](const field& f, const field&, topology& t) {
         t.backbone.path = read_path(f);
         refuse_other_model(f, "torchscript", t);
       }},
      {"wide_features", [](const field& f, const field&, topology& t) {
         t.backbone.wide_features = positive_int64(f);
         refuse_other_model(f, "convnet_wide", t);
       }},
      {"classifier", [](const field& f, const field&, topology& t) {
         t.backbone.classifier = read_choice(f, {"auto", "append"});
         refuse_other_model(f, "torchscript", t);
       }},
      // `baton pretrain` creates the checkpoint: it need not exist yet.
      {"checkpoint", [](const field& f, const field&, topology& t) {
         t.checkpoint_where = f.where();
         t.checkpoint = read_checkpoint(f);
       }},
      {"pretrain", [](const field& f, const field&, topology& t) {
         t.pretrain.where = f.where();
         pretrain_fields().read(f, t);
       }},
    },
    check_torchscript};
  return fields;
}

// The model and its files; the model is built to learn its layer names
// (which a strategy's keys refer to), and an error doing so is reported on
// the key that chose it. Returns those names.
std::vector<std::string> parse_backbone(const field& section, topology& t) {
  t.backbone.seed = model::derive_seed(t.seed, "backbone");
  backbone_fields().read(section, t);
  std::optional<field> model_key = section.get("model");
  if (!model_key && t.schema->own_model)
    return {}; // the job's own section names its model
  const field& blame = t.backbone.name == "torchscript" ? section.require("path")
                       : model_key                      ? *model_key
                                                        : section;
  return layer_names(t.backbone, blame, t);
}

// `task:`, else `backbone.pretrain.task`, else the first of `tasks`; the
// pre-training task defaults to it.
void parse_trained_task(const field& root, topology& t) {
  if (auto f = root.get("task"))
    t.task = read_task(*f, t).name;
  else if (!t.pretrain.task.empty())
    t.task = t.pretrain.task;
  else if (!t.tasks.empty())
    t.task = t.tasks.front().name;
  if (t.pretrain.task.empty())
    t.pretrain.task = t.task;
}

// `target_accuracy` (the workload's), or its older place
// `runtime.stop_at_accuracy`: not both.
void parse_target_accuracy(const field& root, topology& t) {
  auto read = [](const field& f) {
    return read_number(f, "a test accuracy in (0, 1] (0.85 for 85%)",
                       [](double x) { return x > 0 && x <= 1; });
  };
  std::optional<field> runtime = root.get("runtime"), older;
  if (runtime && runtime->node().IsMap())
    older = runtime->get("stop_at_accuracy");
  if (auto f = root.get("target_accuracy"); f && older)
    older->fail("give target_accuracy or runtime.stop_at_accuracy, not both "
                "(runtime.stop_at_accuracy is its older place)");
  read_if(root, "target_accuracy", t.target_accuracy, read);
  if (older)
    t.target_accuracy = read(*older);
}

// `early_stopping: {patience: N}`: it needs both its patience and
// validation samples.
const section_fields<topology>& early_stopping_fields() {
  static const section_fields<topology> fields{
    {
      {"patience", [](const field& f, const field&, topology& t) {
         t.selection.patience = read_integer<int32_t>(f, 1, 1 << 20, "a number of epochs from 1");
       }},
    },
    [](const field& section, topology& t) {
      if (!section.get("patience"))
        section.fail("early_stopping needs patience: the epochs without a higher validation "
                     "accuracy after which the run stops");
      if (t.data.validation <= 0)
        section.fail("early_stopping judges epochs by their validation accuracy, but the data "
                     "holds out no validation samples (give data.validation, e.g. 0.1)");
    }};
  return fields;
}

// `save: best | last` and `early_stopping: {patience: N}`, both judging
// epochs by their validation accuracy: `best` (the default with
// data.validation) needs validation samples, and so does early stopping.
void parse_selection(const field& root, topology& t) {
  const bool validation = t.data.validation > 0;
  t.selection.keep_best = validation;
  if (auto f = root.get("save")) {
    t.selection.keep_best = read_choice(*f, {"best", "last"}) == "best";
    if (t.selection.keep_best && !validation)
      f->fail("save: best keeps the epoch of the highest validation accuracy, but the data "
              "holds out no validation samples (give data.validation, e.g. 0.1, or save: last)");
  }
  if (auto f = root.get("early_stopping"))
    early_stopping_fields().read(*f, t);
}

} // namespace

workload_reading detail::read_workload(const field& root, topology& t) {
  read_if(root, "seed", t.seed, [](const field& f) {
    return read_integer<uint64_t>(f, 0, std::numeric_limits<uint64_t>::max(),
                                  "a non-negative integer");
  });
  t.plan.seed = t.seed;
  const data_reading data = read_data(root.section("data"), t);
  t.tasks = parse_tasks(root.require("tasks"), data.classes, t.data.kind);
  if (auto f = root.get("optimizer")) {
    t.optimizer = read_optimizer(*f, {});
    t.optimizer_where = f->where();
    t.pretrain.optimizer = *t.optimizer;
  }
  std::vector<std::string> layers = parse_backbone(root.section("backbone"), t);
  parse_trained_task(root, t);
  parse_target_accuracy(root, t);
  parse_selection(root, t);
  return {std::move(layers), data.length};
}

std::map<std::string, std::vector<std::string>> detail::workload_section_keys() {
  return {{"early_stopping", early_stopping_fields().keys()},
          {"backbone", backbone_fields().keys()},
          {"backbone.pretrain", pretrain_fields().keys()},
          {"tasks.*", task_fields().keys()}};
}

} // namespace config
} // namespace baton::actors
