// The workload's sections: the job, the data (kind, files, shape, limits,
// normalisation, validation, augmentation), the tasks, the backbone (its
// layer names and ties from model::list_layers: the reader includes no
// LibTorch frontend header), the trained task, the target accuracy and
// which epoch is kept.

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include "actors/config/topology_parts.hpp"
#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "model/core/layer_listing.hpp"

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

// `job:`, one of `jobs` (the first when absent); a job without a parser is
// planned, not implemented yet.
void detail::parse_job(const field& root, const std::vector<job_schema>& jobs, topology& t) {
  std::vector<std::string> names, implemented;
  for (const job_schema& job : jobs) {
    names.push_back(job.name);
    if (job.parse != nullptr)
      implemented.push_back("'" + job.name + "'");
  }
  std::optional<field> f = root.get("job");
  t.job = f ? read_choice(*f, names) : jobs.at(0).name;
  t.schema = &*std::find_if(jobs.begin(), jobs.end(),
                            [&](const job_schema& job) { return job.name == t.job; });
  if (t.schema->parse == nullptr)
    (f ? *f : root).fail("job '" + t.job + "' is not implemented yet (only " + join(implemented) +
                         " are)");
}

namespace {

// `data.synthetic_shape`: [C, H, W] of one sample, each positive, at most
// 2^24 values in all (64 MiB of floats: one sample per message at most).
std::vector<int64_t> read_sample_shape(const field& f) {
  const std::string what = "a list of three positive integers [C, H, W]";
  std::vector<field> items = f.items(what);
  if (items.size() != 3)
    f.fail(f.name() + " must be " + what + ", got " + std::to_string(items.size())
           + " values");
  std::vector<int64_t> shape;
  int64_t values = 1;
  for (const field& item : items) {
    shape.push_back(read_integer<int64_t>(item, 1, int64_t{1} << 24,
                                          "a positive integer (at most 16777216)"));
    values *= shape.back(); // both <= 2^24 here: no overflow
    if (values > (int64_t{1} << 24))
      f.fail(f.name() + " asks for more than 2^24 values per sample (expected [C, H, W] "
             "with C x H x W <= 16777216)");
  }
  return shape;
}

// A synthetic split is made in memory: at most 2^30 float32 values (4 GiB)
// each, so that `synthetic_train: 1e12` is an error and not a bad_alloc.
void check_synthetic_size(const field& data, const std::string& key, const topology& t) {
  if (!t.data.synthetic())
    return;
  std::optional<field> f = data.get(key);
  if (!f)
    f = data.get("synthetic_shape"); // the default count, with this shape
  if (!f)
    f = data;
  constexpr int64_t most_values = int64_t{1} << 30;
  const auto shape = model::data_shape(t.data);
  const int64_t per_sample = shape[0] * shape[1] * shape[2]; // <= 2^24, checked
  const int64_t samples = key == "synthetic_train" ? t.data.synthetic_train
                                                   : t.data.synthetic_test;
  if (samples > most_values / per_sample)
    f->fail("data." + key + " asks for " + std::to_string(samples) + " samples of "
            + std::to_string(per_sample) + " values, more than 2^30 values (4 GiB) in all "
            + "(expected at most " + std::to_string(most_values / per_sample) + " samples)");
}

// The kinds that read files from a directory (`data.dir`), and those whose
// files are named by `data.train` / `data.test` ({images, labels} for idx,
// {x, y} for npy).
bool reads_dir(const std::string& kind) { return kind != "npy" && kind != "synthetic"; }
bool names_files(const std::string& kind) { return kind == "idx" || kind == "npy"; }

// `data.train` / `data.test`: a split's files.
void parse_split_files(const field& data, const std::string& key, topology& t) {
  auto& files = key == "train" ? t.data.train : t.data.test;
  std::optional<field> f = data.get(key);
  const std::string& kind = t.data.kind;
  if (!f) {
    if (kind == "npy")
      data.fail("data.kind is npy but 'data." + key + "' is not given (expected {x: X.npy, "
                "y: Y.npy})");
    return;
  }
  if (!names_files(kind))
    f->fail("'data." + key + "' applies to data.kind idx and npy only (the kind is '" + kind
            + "')");
  check_section(*f);
  const bool npy = kind == "npy";
  const char* samples = npy ? "x" : "images";
  const char* labels = npy ? "y" : "labels";
  for (const char* other : {npy ? "images" : "x", npy ? "labels" : "y"})
    if (auto wrong = f->get(other))
      wrong->fail("'data." + key + "." + other + "' is not read with data.kind " + kind
                  + " (expected " + samples + " and " + labels + ")");
  // idx file names are relative to data.dir; npy paths to the topology file.
  auto read = [&](const field& name) { return npy ? read_path(name) : read_string(name); };
  if (npy) {
    files.x = read(f->require(samples));
    files.y = read(f->require(labels));
  } else {
    read_if(*f, samples, files.x, read);
    read_if(*f, labels, files.y, read);
  }
}

// `data.normalize: {mean: [..], std: [..]}`: one value per channel (or one
// for all), std positive.
void parse_normalize(const field& f, topology& t) {
  check_section(f);
  auto list = [](const field& values, bool positive) {
    std::vector<double> out;
    for (const field& v : values.items("a list of numbers, one per channel", 64))
      out.push_back(read_number(v, positive ? "a positive number" : "a number",
                                [&](double x) { return !positive || x > 0; }));
    if (out.empty())
      values.fail(values.name() + " must have one number per channel, got none");
    return out;
  };
  field mean = f.require("mean"), std = f.require("std");
  t.data.mean = list(mean, false);
  t.data.std = list(std, true);
  if (t.data.mean.size() != t.data.std.size())
    std.fail(std.name() + " has " + std::to_string(t.data.std.size()) + " values, mean has "
             + std::to_string(t.data.mean.size()) + " (expected one per channel in each)");
}

// `data.kind`, or its older spelling `data.dataset` (fashion-mnist or
// synthetic); not both.
void parse_kind(const field& data, topology& t) {
  std::optional<field> dataset = data.get("dataset"), kind = data.get("kind");
  if (dataset && kind)
    kind->fail("give data.kind or data.dataset, not both (data.dataset is its older name)");
  read_if(data, "dataset", t.data.kind,
          [](const field& f) { return read_choice(f, {"fashion-mnist", "synthetic"}); });
  read_if(data, "kind", t.data.kind, [](const field& f) {
    return read_choice(f, {"fashion-mnist", "idx", "cifar10", "cifar100", "npy",
                           "image-folder", "synthetic"});
  });
  const std::string& k = t.data.kind;
  if (k == "npy")
    t.data.train = t.data.test = {};
  // A synthetic set ignores data.dir, so that `--set data.dataset=synthetic`
  // works over a file that names a directory (as it always has).
  if (auto f = data.get("dir"); f && k == "npy")
    f->fail("'data.dir' is not read with data.kind npy (give data.train and data.test: "
            "{x: X.npy, y: Y.npy})");
  if (k != "fashion-mnist" && reads_dir(k) && !data.get("dir"))
    (kind ? *kind : data).fail("data.kind is " + k + " but 'data.dir' is not given");
}

// `data.shape` (image-folder: the size every image is resized to; other
// file kinds: what the samples are, checked when they are read) and
// `data.synthetic_shape` (synthetic: the samples made).
void parse_shape(const field& data, topology& t) {
  if (auto f = data.get("synthetic_shape")) {
    if (!t.data.synthetic())
      f->fail(f->name() + " applies to data.dataset: synthetic only (the dataset is '"
              + t.data.kind + "')");
    t.data.shape = read_sample_shape(*f);
  }
  if (auto f = data.get("shape")) {
    if (t.data.synthetic())
      f->fail("'data.shape' is data.synthetic_shape for data.kind synthetic");
    t.data.shape = read_sample_shape(*f);
  }
}

} // namespace

void detail::parse_data(const field& data, topology& t) {
  check_section(data);
  t.data.seed = t.plan.seed;
  parse_kind(data, t);
  read_if(data, "dir", t.data.path, read_path);
  parse_split_files(data, "train", t);
  parse_split_files(data, "test", t);
  if (auto f = data.get("label")) {
    if (t.data.kind != "cifar100")
      f->fail("'data.label' applies to data.kind cifar100 only (the kind is '" + t.data.kind
              + "')");
    t.data.label = read_choice(*f, {"fine", "coarse"});
  }
  parse_shape(data, t);
  read_if(data, "classes", t.data.classes, [](const field& f) {
    return read_integer<int64_t>(f, 1, int64_t{1} << 20, "a number of classes from 1 to 2^20");
  });
  if (auto f = data.get("normalize"))
    parse_normalize(*f, t);
  read_if(data, "memory_mb", t.data.memory_mb, [](const field& f) {
    return read_number(f, "a positive number of MiB", [](double x) { return x > 0; });
  });
  read_if(data, "train_limit", t.data.train_limit, non_negative_int64);
  read_if(data, "test_limit", t.data.test_limit, non_negative_int64);
  read_if(data, "batch_size", t.plan.batch_size, positive_int64);
  read_if(data, "epochs", t.plan.epochs, positive_int32);
  read_if(data, "synthetic_train", t.data.synthetic_train, positive_int64);
  read_if(data, "synthetic_test", t.data.synthetic_test, positive_int64);
  check_synthetic_size(data, "synthetic_train", t);
  check_synthetic_size(data, "synthetic_test", t);
  read_if(data, "node", t.source_node, [&](const field& f) { return read_node(f, t.nodes); });
  read_if(data, "validation", t.data.validation, [](const field& f) {
    return read_number(f, "a fraction of the training samples above 0 and below 1 (0.1 for 10%)",
                       [](double x) { return x > 0 && x < 1; });
  });
  if (auto f = data.get("augment")) {
    check_section(*f);
    read_if(*f, "crop", t.data.augment.crop, [](const field& c) {
      return read_integer<int64_t>(c, 0, 1 << 20, "a number of pixels from 0");
    });
    read_if(*f, "flip", t.data.augment.flip, read_bool);
  }
  // Read last: its upper bound is the batch size, wherever that key is.
  if (auto f = data.get("microbatches")) {
    auto most = static_cast<int32_t>(
      std::min<int64_t>(t.plan.batch_size, std::numeric_limits<int32_t>::max()));
    t.plan.microbatches = read_integer<int32_t>(
      *f, 1, most, "an integer from 1 to the batch size (" + std::to_string(most) + ")");
  }
}


namespace {

// What the data is when the coordinator cannot read its files (they are on
// the source's node): the kind's fixed shape and classes, or data.shape and
// data.classes. Fails naming what to give.
model::data_header declared_header(const field& data, const topology& t,
                                   const std::string& why) {
  const model::data_spec& d = t.data;
  model::data_header h;
  h.shape = d.shape;
  if (d.kind == "fashion-mnist")
    h.shape = {1, 28, 28};
  if (d.kind == "cifar10" || d.kind == "cifar100")
    h.shape = {3, 32, 32};
  const bool classes_known = d.classes > 0 || (d.kind != "npy" && d.kind != "image-folder");
  const std::string missing = h.shape.empty() && !classes_known ? "data.shape [C, H, W] and "
                                                                  "data.classes"
                              : h.shape.empty()                 ? "data.shape [C, H, W]"
                              : !classes_known                  ? "data.classes"
                                                                : "";
  if (!missing.empty())
    data.fail("the dataset's files are not read here (" + why + "), so the data section must "
              "say what the models are built for: give " + missing + " (docs/data.md)");
  h.classes = model::data_classes(d);
  h.train = d.train_limit;
  h.test = d.test_limit;
  return h;
}

} // namespace

// The data's shape, classes and sizes: a synthetic set's as the topology
// says; files are read here (their headers only) when this process or its
// local nodes will read them (no `nodes:` listed), which also refuses a
// missing, unreadable or corrupt dataset, and one over data.memory_mb,
// before any actor or process starts. On listed nodes the source's node
// reads them, and the data section says what they are (declared_header);
// `known` is then false: the training size is at most data.train_limit.
model::data_header detail::check_dataset(const field& data, const topology& t, bool& known) {
  known = t.embedded() || t.data.synthetic();
  if (!known)
    return declared_header(data, t,
                           t.job == "data-parallel" || t.job == "ist"
                             ? "each worker reads its shard of them on its own node"
                             : "they are read on the source's node, data.node");
  std::optional<field> dir = data.get("dir");
  std::optional<field> kind = data.get("kind") ? data.get("kind") : data.get("dataset");
  const field& blame = dir ? *dir : kind ? *kind : data;
  try {
    return model::read_data_header(t.data);
  } catch (const model::file_error& e) {
    const std::string where =
      reads_dir(t.data.kind) ? " in '" + t.data.path + "' (data.dir)" : std::string{};
    blame.fail("cannot read the dataset " + t.data.kind + where + ": " + e.what());
  } catch (const model::error& e) {
    // data.validation that leaves a part empty is its own key's fault.
    const std::string what = e.what();
    std::optional<field> validation = data.get("validation");
    (validation && what.rfind("data.validation", 0) == 0 ? *validation : blame).fail(what);
  }
}

// `data.normalize` has one value for every channel, or one for all: the
// samples' channels are known only once their headers are read.
void detail::check_normalize(const field& data, const topology& t, const model::data_header& h) {
  const auto values = static_cast<int64_t>(t.data.mean.size());
  if (values <= 1 || h.shape.empty() || values == h.shape[0])
    return;
  data.require("normalize").fail("data.normalize has " + std::to_string(values)
                                 + " values in mean and std, the samples have "
                                 + std::to_string(h.shape[0])
                                 + " channels (expected one value per channel, or one for all)");
}

// Steps = epochs x minibatches per epoch (a last partial minibatch counts, as
// model::plan_epoch cuts it); nullopt when the size is unknown or the count
// would not fit in 64 bits.
std::optional<job_length> detail::length_of(const model::data_header& data, bool known,
                                    const topology& t) {
  const std::optional<int64_t> samples =
    known ? std::optional<int64_t>{data.train}
          : data.train > 0 ? std::optional<int64_t>{data.train} : std::nullopt;
  if (!samples)
    return std::nullopt;
  const int64_t batch = t.plan.batch_size;
  const int64_t per_epoch = *samples / batch + (*samples % batch != 0 ? 1 : 0);
  if (per_epoch > std::numeric_limits<int64_t>::max() / t.plan.epochs)
    return std::nullopt;
  const int32_t epochs = t.plan.epochs;
  return job_length{
    per_epoch * epochs,
    epochs_text(epochs) + " x "
      + std::to_string(per_epoch) + " minibatches of " + std::to_string(batch) + " from "
      + (!known ? "at most " : "")
      + std::to_string(*samples) + " training samples"};
}

namespace {

// A task maps each class of the dataset to a task class: the map has one
// entry per dataset class (a shorter one would index past its end) and the
// task has at most as many classes (a task class of 99 would make a 100-way
// head that never sees 90 of them, 1e8 a 51 GB one). The size is checked
// before any entry is read.
model::task parse_task(const field& item, int64_t classes, const std::string& dataset) {
  check_section(item);
  std::string name = read_new_name(item.require("name"), "task");
  field labels = item.require("labels");
  const std::string count = std::to_string(classes);
  if (labels.node().IsSequence() && labels.node().size() != static_cast<size_t>(classes))
    labels.fail(labels.name() + " must map the " + count + " classes of " + dataset + ", got "
                + std::to_string(labels.node().size()) + " labels");
  const std::string what = "a task class from 0 to " + std::to_string(classes - 1) + " ("
                           + dataset + " has " + count + " classes; a task has at most as many)";
  std::vector<int64_t> label_map;
  for (const field& label :
       labels.items("a list of task classes, one per dataset class", static_cast<size_t>(classes)))
    label_map.push_back(read_integer<int64_t>(label, 0, classes - 1, what));
  if (label_map.empty()) // `labels: []` or `labels:` with nothing
    labels.fail(labels.name() + " must map the " + count + " classes of " + dataset
                + ", got no labels");
  try {
    return model::make_task(name, label_map);
  } catch (const model::error& e) {
    labels.fail(e.what());
  }
}

} // namespace

std::vector<model::task> detail::parse_tasks(const field& list, int64_t classes,
                                     const std::string& dataset) {
  std::vector<model::task> tasks;
  unique_names names("task");
  for (const field& item : list.items("a list of tasks ({name, labels})", max_tasks)) {
    tasks.push_back(parse_task(item, classes, dataset));
    names.add(item.require("name"), tasks.back().name);
  }
  return tasks;
}

namespace {

void parse_pretrain(const field& section, topology& t) {
  check_section(section);
  read_if(section, "task", t.pretrain.task, [&](const field& f) { return read_task(f, t).name; });
  read_if(section, "epochs", t.pretrain.epochs, positive_int32);
  read_if(section, "train_limit", t.pretrain.train_limit, non_negative_int64);
  // A per-part override over the workload's optimizer section.
  read_if(section, "optimizer", t.pretrain.optimizer,
          [&](const field& f) { return read_optimizer(f, t.pretrain.optimizer); });
  read_if(section, "if_missing", t.pretrain.if_missing_pretrain,
          [](const field& f) { return read_choice(f, {"error", "pretrain"}) == "pretrain"; });
}

// The backbone's layer names, which a strategy's keys name, and its ties.
std::vector<std::string> layer_names(const model::model_spec& spec, const field& blame,
                                     std::vector<model::layer_tie>& ties) {
  model::layer_listing layers;
  try {
    layers = model::list_layers(spec);
  } catch (const std::exception& e) { // model::error, and anything LibTorch's loader throws
    blame.fail("cannot build the backbone: " + std::string(e.what()));
  }
  if (layers.names.empty())
    blame.fail("the backbone has no layers (a TorchScript backbone's top-level children are "
               "its layers)");
  ties = std::move(layers.ties);
  return layers.names;
}

// `backbone.KEY` describes the model `model` only: with another it would be
// ignored, so it is refused.
void refuse_other_model(const field& section, const char* key, const std::string& model,
                        const std::string& name) {
  if (auto f = section.get(key); f && name != model)
    f->fail(f->name() + " is read with backbone.model: " + model + " only (the model is '" +
            name + "')");
}

} // namespace

// The model and its files; the model is built to learn its layer names
// (which a strategy's keys refer to), and an error doing so is reported on
// the key that chose it. Returns those names.
std::vector<std::string> detail::parse_backbone(const field& section, topology& t) {
  check_section(section);
  t.backbone.seed = model::derive_seed(t.seed, "backbone");
  std::optional<field> model_key = section.get("model");
  if (model_key)
    t.backbone.name =
      read_choice(*model_key, {"convnet", "convnet_wide", "resnet18", "torchscript"});
  read_if(section, "wide_features", t.backbone.wide_features, positive_int64);
  // `baton pretrain` creates the checkpoint: it need not exist yet.
  read_if(section, "checkpoint", t.checkpoint, [&](const field& f) {
    t.checkpoint_where = f.where();
    return read_checkpoint(f);
  });
  std::optional<field> path_key = section.get("path");
  if (path_key)
    t.backbone.path = read_path(*path_key);
  bool torchscript = t.backbone.name == "torchscript";
  refuse_other_model(section, "path", "torchscript", t.backbone.name);
  refuse_other_model(section, "wide_features", "convnet_wide", t.backbone.name);
  read_if(section, "classifier", t.backbone.classifier,
          [](const field& f) { return read_choice(f, {"auto", "append"}); });
  refuse_other_model(section, "classifier", "torchscript", t.backbone.name);
  if (torchscript && !path_key)
    model_key->fail("'backbone.model' is torchscript but 'backbone.path' is not given");
  if (torchscript && !fs::exists(t.backbone.path))
    path_key->fail("'backbone.path' names '" + path_key->node().Scalar() + "', but '"
                   + t.backbone.path + "' does not exist");
  if (auto f = section.get("pretrain"))
    parse_pretrain(*f, t);
  if (!model_key && t.schema->own_model)
    return {}; // the job's own section names its model
  const field& blame = torchscript ? *path_key : model_key ? *model_key : section;
  return layer_names(t.backbone, blame, t.backbone_ties);
}

// `task:`, else `backbone.pretrain.task`, else the first of `tasks`; the
// pre-training task defaults to it.
void detail::parse_trained_task(const field& root, topology& t) {
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
void detail::parse_target_accuracy(const field& root, topology& t) {
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

// `save: best | last` and `early_stopping: {patience: N}`, both judging
// epochs by their validation accuracy: `best` (the default with
// data.validation) needs validation samples, and so does early stopping.
void detail::parse_selection(const field& root, topology& t) {
  const bool validation = t.data.validation > 0;
  t.selection.keep_best = validation;
  if (auto f = root.get("save")) {
    t.selection.keep_best = read_choice(*f, {"best", "last"}) == "best";
    if (t.selection.keep_best && !validation)
      f->fail("save: best keeps the epoch of the highest validation accuracy, but the data "
              "holds out no validation samples (give data.validation, e.g. 0.1, or save: last)");
  }
  if (auto f = root.get("early_stopping")) {
    check_section(*f);
    read_if(*f, "patience", t.selection.patience, [](const field& p) {
      return read_integer<int32_t>(p, 1, 1 << 20, "a number of epochs from 1");
    });
    if (!f->get("patience"))
      f->fail("early_stopping needs patience: the epochs without a higher validation "
              "accuracy after which the run stops");
    if (!validation)
      f->fail("early_stopping judges epochs by their validation accuracy, but the data holds "
              "out no validation samples (give data.validation, e.g. 0.1)");
  }
}

// `data.augment`: image samples only, and a crop that keeps part of each
// (checked once their shape is known).
void detail::check_augment(const field& data, const topology& t, const model::data_header& h) {
  if (!t.data.augment.any())
    return;
  if (auto why = model::augment_refusal(t.data.augment, t.data.kind, h.shape); !why.empty())
    data.require("augment").fail(why);
}

// The backbone takes the data's samples: its input channels and size are
// the samples' (the convnets' flatten width follows from the size, and
// building them refuses one under 8x8; resnet18 takes any size). A
// TorchScript backbone's input is not known before it runs.
void detail::set_sample_shape(const model::data_header& h, topology& t) {
  t.sample_shape = h.shape;
  t.backbone.in_channels = h.shape[0];
  t.backbone.in_height = h.shape[1];
  t.backbone.in_width = h.shape[2];
}

} // namespace config
} // namespace baton::actors
