#include "actors/config/topology.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <exception>
#include <utility>

#include <c10/util/Exception.h>
#include <yaml-cpp/yaml.h>

#include "actors/config/job_schema.hpp"
#include "actors/config/yaml_codec.hpp"
#include "actors/config/yaml_field.hpp"
#include "actors/net/system.hpp"
#include "messages/errc.hpp"
#include "model/core/batches.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/augment.hpp"
#include "model/core/optimizer.hpp"

namespace baton::actors {
inline namespace config {

namespace {

namespace fs = std::filesystem;

// The located fields and their checked readers (actors/config/yaml_field.hpp).
using namespace detail;

static_assert(max_topology_bytes == max_config_bytes, "one limit on config files");

// -- schema -------------------------------------------------------------------

// The keys of each map section by path pattern ("*" stands for a list index).
// The validation and `--set` both read this one table, so they cannot
// disagree about what a known key is.
const std::map<std::string, std::vector<std::string>>& section_keys() {
  static const std::vector<std::string> optimizer = optimizer_keys();
  static const std::map<std::string, std::vector<std::string>> keys = {
    {"", {"job", "seed", "data", "backbone", "tasks", "task", "target_accuracy", "save",
          "early_stopping", "runtime", "nodes", "faults", "optimizer"}},
    {"early_stopping", {"patience"}},
    {"optimizer", optimizer},
    {"data", {"dataset", "kind", "dir", "train", "test", "label", "shape", "classes",
              "normalize", "memory_mb", "train_limit", "test_limit", "batch_size",
              "microbatches", "epochs", "node", "synthetic_train", "synthetic_test",
              "synthetic_shape", "validation", "augment"}},
    {"data.augment", {"crop", "flip"}},
    {"data.train", {"images", "labels", "x", "y"}},
    {"data.test", {"images", "labels", "x", "y"}},
    {"data.normalize", {"mean", "std"}},
    {"backbone", {"model", "path", "wide_features", "classifier", "checkpoint", "pretrain"}},
    {"backbone.pretrain", {"task", "epochs", "train_limit", "optimizer", "if_missing"}},
    {"backbone.pretrain.optimizer", optimizer},
    {"tasks.*", {"name", "labels"}},
    {"runtime", {"window", "scheduler_threads", "compute_threads", "stage_threads", "heartbeat_ms",
                 "connection_timeout_ms", "request_timeout_ms", "progress_every",
                 "checkpoint_every", "checkpoint_dir", "max_restarts", "stall_timeout_ms",
                 "slow_node_timeout_ms",
                 "stop_at_accuracy", "stop_after_seconds", "shared_memory", "tls"}},
    {"runtime.tls", {"certificate", "key", "ca"}},
    {"faults.*", {"kind", "actor", "node", "at_step", "after_ms", "stopped_ms", "from", "to",
                  "delay_ms", "rate", "seed"}},
    {"nodes.*", {"name", "host", "port"}},
  };
  return keys;
}

// The jobs `source` is parsed with.
const std::vector<job_schema>& jobs_of(const source_info& source) {
  static const std::vector<job_schema> none;
  return source.jobs != nullptr ? *source.jobs : none;
}

// Appends the keys of `more` that `keys` does not have yet.
void add_keys(std::optional<std::vector<std::string>>& keys, const std::vector<std::string>& more) {
  if (!keys)
    keys.emplace();
  for (const auto& key : more)
    if (!contains(*keys, key))
      keys->push_back(key);
}

// The keys of the map at `pattern`: the common sections' and every job's
// (each job's own section is a key of the top level; a job's keys at a
// common path add to the common ones); nullopt for a path that is not a
// map of the schema. Which job may use a key is checked once `job:` is
// known (refuse_other_jobs).
std::optional<std::vector<std::string>> keys_of(const std::string& pattern,
                                                const source_info& source) {
  std::optional<std::vector<std::string>> keys;
  if (auto common = section_keys().find(pattern); common != section_keys().end())
    keys = common->second;
  for (const job_schema& job : jobs_of(source)) {
    if (pattern.empty() && !job.section.empty())
      add_keys(keys, {job.section});
    if (auto own = job.keys.find(pattern); own != job.keys.end())
      add_keys(keys, own->second);
  }
  return keys;
}

// Paths whose value is a list; `--set` addresses their entries by index.
bool is_list(const std::string& pattern, const source_info& source) {
  static const std::vector<std::string> lists = {"tasks", "nodes", "tasks.*.labels", "faults"};
  if (contains(lists, pattern))
    return true;
  for (const job_schema& job : jobs_of(source))
    if (contains(job.lists, pattern))
      return true;
  return false;
}

std::optional<size_t> parse_index(const std::string& text) {
  size_t value = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (text.empty() || ec != std::errc{} || end != last)
    return std::nullopt;
  return value;
}

// "tasks.2.labels" -> "tasks.*.labels": the schema entry of a path.
std::string pattern_of(const std::string& path) {
  std::string out, segment;
  std::istringstream in(path);
  while (std::getline(in, segment, '.'))
    out = child_path(out, parse_index(segment) ? "*" : segment);
  return out;
}

// "at the top level" / "in 'runtime'", for key errors.
std::string in_section(const std::string& path) {
  return path.empty() ? "at the top level" : "in '" + path + "'";
}

// "; did you mean 'epochs'?" after a key error (did_you_mean), or "".
std::string hint(const std::string& suggestion) {
  return suggestion.empty() ? suggestion : "; " + suggestion;
}

} // namespace

// -- checked readers ------------------------------------------------------------

std::string detail::at_most(size_t most, const std::string& what) {
  return "at most " + std::to_string(most) + " " + what;
}

void detail::check_section(const field& f) {
  if (f.is_null())
    return;
  if (!f.node().IsMap())
    f.expected("a map");
  const auto allowed = keys_of(pattern_of(f.path()), f.source()).value();
  std::vector<std::string> seen;
  for (const auto& entry : f.node()) {
    const std::string& key = entry.first.Scalar();
    field at = f.child(entry.first, entry.first);
    if (!contains(allowed, key))
      at.fail("unknown key " + quoted(key) + " " + in_section(f.path()) + " (expected one of: "
              + join(allowed) + ")" + hint(did_you_mean(key, allowed)));
    if (contains(seen, key))
      at.fail("key " + quoted(key) + " appears twice " + in_section(f.path()));
    seen.push_back(key);
  }
}

// The checkpoint path, or "" for none: `none`, an empty string or no value
// (the backbone keeps its seeded initial weights, as speed tests want).
std::string read_checkpoint(const field& f) {
  if (f.is_null() || (f.node().IsScalar() && f.node().Scalar().empty()))
    return "";
  return read_string(f) == "none" ? std::string{} : read_path(f);
}

std::string detail::read_node(const field& f, const std::vector<node_address>& nodes) {
  std::string name = read_name(f);
  if (nodes.empty())
    f.fail(f.name() + " names node '" + name
           + "' but the topology has no nodes (list them under 'nodes')");
  std::vector<std::string> names;
  for (const auto& node : nodes)
    names.push_back(node.name);
  if (!contains(names, name))
    f.fail(f.name() + " names node '" + name + "', which is not under 'nodes' (expected one of: "
           + join(names) + ")");
  return name;
}

const std::vector<std::string>& detail::optimizer_keys() {
  static const std::vector<std::string> keys = {
    "name",     "lr",            "momentum",    "nesterov", "betas", "eps",    "weight_decay",
    "schedule", "warmup_epochs", "step_epochs", "gamma",    "min_lr", "clip_grad_norm"};
  return keys;
}

model::optimizer_spec detail::read_optimizer(const field& section,
                                             model::optimizer_spec optimizer) {
  check_section(section);
  auto non_negative = [](const field& f) {
    return read_number(f, "a non-negative number", [](double x) { return x >= 0; });
  };
  auto fraction = [](const field& f) {
    return read_number(f, "a number in [0, 1)", [](double x) { return x >= 0 && x < 1; });
  };
  auto positive = [](const field& f) {
    return read_number(f, "a positive number", [](double x) { return x > 0; });
  };
  read_if(section, "name", optimizer.name,
          [](const field& f) { return read_choice(f, model::optimizer_names()); });
  read_if(section, "lr", optimizer.lr, positive);
  read_if(section, "momentum", optimizer.momentum, fraction);
  read_if(section, "nesterov", optimizer.nesterov, read_bool);
  if (auto f = section.get("betas")) {
    std::vector<double> betas;
    for (const field& v : f->items("a list of two numbers in [0, 1) (beta1, beta2)", 2))
      betas.push_back(fraction(v));
    if (betas.size() != 2)
      f->fail(f->name() + " must be two numbers [beta1, beta2], got " +
              std::to_string(betas.size()));
    optimizer.beta1 = betas[0];
    optimizer.beta2 = betas[1];
  }
  read_if(section, "eps", optimizer.eps, positive);
  read_if(section, "weight_decay", optimizer.weight_decay, non_negative);
  read_if(section, "schedule", optimizer.schedule,
          [](const field& f) { return read_choice(f, model::schedule_names()); });
  read_if(section, "warmup_epochs", optimizer.warmup_epochs, [](const field& f) {
    return read_number(f, "a number of epochs in [0, 1000]",
                       [](double x) { return x >= 0 && x <= 1000; });
  });
  read_if(section, "step_epochs", optimizer.step_epochs, positive);
  read_if(section, "gamma", optimizer.gamma, positive);
  read_if(section, "min_lr", optimizer.min_lr, non_negative);
  read_if(section, "clip_grad_norm", optimizer.clip_grad_norm, non_negative);
  // Settings that only make sense with another name are refused, not ignored.
  auto only = [&](const char* key, bool ok, const std::string& why) {
    if (auto f = section.get(key); f && !ok)
      f->fail(f->name() + " " + why + " (optimizer name is " + optimizer.name + ")");
  };
  const bool sgd = optimizer.name == "sgd";
  only("momentum", sgd, "is SGD's; adam and adamw take betas");
  only("nesterov", sgd && (!optimizer.nesterov || optimizer.momentum > 0),
       "needs sgd with momentum > 0");
  only("betas", !sgd, "are adam's and adamw's");
  only("eps", !sgd, "is adam's and adamw's");
  only("step_epochs", optimizer.schedule == "step", "needs schedule: step");
  only("gamma", optimizer.schedule == "step", "needs schedule: step");
  only("min_lr", optimizer.schedule == "cosine", "needs schedule: cosine");
  if (!section.get("momentum") && !sgd)
    optimizer.momentum = 0; // not adam's: shown as 0 in plans, never read
  try {
    model::check_optimizer(optimizer);
  } catch (const model::error& e) {
    section.fail(section.name() + ": " + e.what());
  }
  return optimizer;
}

int32_t detail::read_compute_threads(const field& f) {
  return read_integer<int32_t>(f, 1, max_compute_threads,
                               "a number of threads per actor from 1 to "
                                 + std::to_string(max_compute_threads));
}

const model::task& detail::read_task(const field& f, const workload& t) {
  std::string name = read_name(f);
  if (const model::task* found = t.find_task(name))
    return *found;
  std::vector<std::string> names;
  for (const auto& task : t.tasks)
    names.push_back(task.name);
  if (names.empty())
    f.fail(f.name() + " names task '" + name + "' but the topology has no tasks");
  f.fail(f.name() + " names unknown task '" + name + "' (expected one of the tasks: "
         + join(names) + ")");
}

namespace {

// -- sections -------------------------------------------------------------------

// `job:`, one of `jobs` (the first when absent); a job without a parser is
// planned, not implemented yet.
void parse_job(const field& root, const std::vector<job_schema>& jobs, topology& t) {
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

void parse_data(const field& data, topology& t) {
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
  const bool classes_known = d.classes > 0 || d.kind != "npy" && d.kind != "image-folder";
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

// The data's shape, classes and sizes: a synthetic set's as the topology
// says; files are read here (their headers only) when this process or its
// local nodes will read them (no `nodes:` listed), which also refuses a
// missing, unreadable or corrupt dataset, and one over data.memory_mb,
// before any actor or process starts. On listed nodes the source's node
// reads them, and the data section says what they are (declared_header);
// `known` is then false: the training size is at most data.train_limit.
model::data_header check_dataset(const field& data, const topology& t, bool& known) {
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
void check_normalize(const field& data, const topology& t, const model::data_header& h) {
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
std::optional<job_length> length_of(const model::data_header& data, bool known,
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

// The backbone's layer names, which a strategy's keys name, and its ties. convnet_wide is built
// narrow: its names do not depend on the width, and the default width would
// allocate ~150 MB only to read them.
std::vector<std::string> layer_names(model::model_spec spec, const field& blame,
                                     std::vector<model::layer_tie>& ties) {
  if (spec.name == "convnet_wide")
    spec.wide_features = 1;
  std::vector<std::string> names;
  try {
    const auto m = model::make_model(spec);
    names = m.layer_names();
    ties = model::layer_ties(m);
  } catch (const model::error& e) {
    blame.fail("cannot build the backbone: " + std::string(e.what()));
  } catch (const c10::Error& e) {
    blame.fail("cannot build the backbone: " + std::string(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    blame.fail("cannot build the backbone: " + std::string(e.what()));
  }
  if (names.empty())
    blame.fail("the backbone has no layers (a TorchScript backbone's top-level children are "
               "its layers)");
  return names;
}

// `backbone.KEY` describes the model `model` only: with another it would be
// ignored, so it is refused.
void refuse_other_model(const field& section, const char* key, const std::string& model,
                        const std::string& name) {
  if (auto f = section.get(key); f && name != model)
    f->fail(f->name() + " is read with backbone.model: " + model + " only (the model is '" +
            name + "')");
}

// The model and its files; the model is built to learn its layer names
// (which a strategy's keys refer to), and an error doing so is reported on
// the key that chose it. Returns those names.
std::vector<std::string> parse_backbone(const field& section, topology& t) {
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
void check_augment(const field& data, const topology& t, const model::data_header& h) {
  if (!t.data.augment.any())
    return;
  if (auto why = model::augment_refusal(t.data.augment, t.data.kind, h.shape); !why.empty())
    data.require("augment").fail(why);
}

// `runtime.tls`: this run's certificate, key and CA, checked here because
// CAF aborts the process on files it cannot load.
tls_settings parse_tls(const field& section) {
  check_section(section);
  tls_settings tls;
  read_if(section, "certificate", tls.certificate, read_path);
  read_if(section, "key", tls.key, read_path);
  read_if(section, "ca", tls.ca, read_path);
  if (auto err = check_tls_files(tls))
    section.fail("'runtime.tls' (or --tls-cert, --tls-key, --tls-ca): " + describe(err));
  return tls;
}

// `runtime.compute_threads`, or its older name `runtime.stage_threads`: not both.
void parse_compute_threads(const field& section, runtime_spec& r) {
  std::optional<field> f = section.get("compute_threads"), older = section.get("stage_threads");
  if (f && older)
    older->fail("give runtime.compute_threads or runtime.stage_threads, not both "
                "(runtime.stage_threads is its older name)");
  if (!f)
    f = older;
  if (f)
    r.compute_threads = read_compute_threads(*f);
  r.compute_threads_asked = f.has_value();
}

void parse_runtime(const field& section, runtime_spec& r) {
  check_section(section);
  // Messages in flight per edge; each may be 64 MiB, and the receiver holds them.
  read_if(section, "window", r.window, [](const field& f) {
    auto window = positive_int32(f);
    if (window > 256)
      f.expected("a positive integer at most 256 (messages in flight per edge)");
    return window;
  });
  read_if(section, "scheduler_threads", r.scheduler_threads, [](const field& f) {
    return read_integer<int32_t>(f, 1, max_scheduler_threads,
                                 "a number of threads from 1 to "
                                   + std::to_string(max_scheduler_threads));
  });
  parse_compute_threads(section, r);
  read_if(section, "heartbeat_ms", r.heartbeat_interval, positive_milliseconds);
  read_if(section, "connection_timeout_ms", r.connection_timeout, positive_milliseconds);
  read_if(section, "request_timeout_ms", r.request_timeout, positive_milliseconds);
  read_if(section, "progress_every", r.progress_every, positive_int32);
  read_if(section, "checkpoint_every", r.checkpoint_every, [](const field& f) {
    return read_integer<int32_t>(f, 0, std::numeric_limits<int32_t>::max(),
                                 "a number of steps (0: no checkpoints)");
  });
  read_if(section, "checkpoint_dir", r.checkpoint_dir, read_path);
  read_if(section, "max_restarts", r.max_restarts, [](const field& f) {
    return read_integer<int32_t>(f, 0, 1000, "a number of restarts from 0 to 1000");
  });
  read_if(section, "stall_timeout_ms", r.stall_timeout, positive_milliseconds);
  read_if(section, "slow_node_timeout_ms", r.slow_node_timeout, positive_milliseconds);
  read_if(section, "stop_after_seconds", r.stop_after_seconds, [](const field& f) {
    return read_number(f, "a number of seconds above 0", [](double x) { return x > 0; });
  });
  read_if(section, "shared_memory", r.shared_memory, read_bool);
  if (auto f = section.get("tls"))
    r.tls = parse_tls(*f);
}

} // namespace

namespace {

// The edge of a delay or drop fault: `from` sends to `to` (an edge of the
// job's plan, checked when it is made: actors/runtime/plan_checks.hpp).
void read_edge_fault(const field& item, fault_spec& f) {
  f.from = read_name(item.require("from"));
  f.to = read_name(item.require("to"));
  if (f.kind == "delay")
    f.delay = positive_milliseconds(item.require("delay_ms"));
  else if (f.at_step < 0)
    item.fail("fault 'drop' needs at_step (the step whose first microbatch is dropped)");
}

fault_spec parse_fault(const field& item) {
  check_section(item);
  fault_spec f;
  f.where = item.where();
  f.kind = read_choice(item.require("kind"),
                       {"throw", "kill_node", "stop_node", "delay", "drop", "chaos"});
  read_if(item, "at_step", f.at_step, non_negative_int64);
  read_if(item, "after_ms", f.after, positive_milliseconds);
  auto only = [&](const std::vector<std::string>& keys) {
    for (const auto* key : {"actor", "node", "at_step", "after_ms", "stopped_ms", "from", "to",
                            "delay_ms", "rate", "seed"})
      if (item.get(key) && !contains(keys, key))
        item.fail("fault '" + f.kind + "' takes " + join(keys) + " (not " + key + ")");
  };
  if (f.kind == "delay" || f.kind == "drop") {
    only({"kind", "from", "to", f.kind == "delay" ? "delay_ms" : "at_step"});
    read_edge_fault(item, f);
    return f;
  }
  if (f.kind == "chaos") {
    only({"kind", "rate", "seed"});
    f.rate = read_number(item.require("rate"), "a probability per step in (0, 1]",
                         [](double x) { return x > 0 && x <= 1; });
    read_if(item, "seed", f.seed, [](const field& s) {
      return read_integer<uint64_t>(s, 0, std::numeric_limits<uint64_t>::max(), "a seed");
    });
    return f;
  }
  if (f.kind == "throw") {
    // A trainable actor of the job's plan, checked when it is made.
    f.actor = read_name(item.require("actor"));
    if (f.at_step < 0)
      item.fail("fault 'throw' needs at_step (the step during which the actor throws)");
    if (item.get("node") || item.get("after_ms") || item.get("stopped_ms"))
      item.fail("fault 'throw' takes kind, actor and at_step only");
  } else {
    // Nodes are checked when the job starts: `--local-nodes` makes them later.
    f.node = read_name(item.require("node"));
    if ((f.at_step < 0) == (f.after.count() < 0))
      item.fail("fault '" + f.kind + "' needs exactly one of at_step and after_ms");
    if (item.get("actor"))
      item.fail("fault '" + f.kind + "' names a node, not an actor");
    if (f.kind == "stop_node")
      f.stopped = positive_milliseconds(item.require("stopped_ms"));
    else if (item.get("stopped_ms"))
      item.fail("stopped_ms applies to kind stop_node only");
  }
  return f;
}

// A fault at a step the job never reaches would never fire: a run "with a
// fault" that has none. Refused when the job's length is known here.
void check_fault_step(const field& item, const fault_spec& f,
                      const std::optional<job_length>& length) {
  std::optional<field> at_step = item.get("at_step");
  if (!at_step || !length || f.at_step < length->steps)
    return;
  const std::string& step = length->step;
  const std::string expected =
    length->steps == 0 ? "expected no fault at a " + step
                       : "expected a " + step + " from 0 to " + std::to_string(length->steps - 1);
  at_step->fail(at_step->name() + " is " + std::to_string(f.at_step) + ", but the job has "
                + std::to_string(length->steps) + " " + step + "s (" + length->how
                + "), so the fault would never fire (" + expected + ")");
}

std::vector<fault_spec> parse_faults(const field& list, const std::optional<job_length>& length) {
  std::vector<fault_spec> faults;
  for (const field& item : list.items("a list of faults ({kind, actor | node, at_step | "
                                      "after_ms, stopped_ms})", max_faults)) {
    faults.push_back(parse_fault(item));
    check_fault_step(item, faults.back(), length);
  }
  return faults;
}

std::vector<node_address> parse_nodes(const field& list) {
  std::vector<node_address> nodes;
  unique_names names("node"), addresses("address");
  for (const field& item : list.items("a list of nodes ({name, host, port})", max_nodes)) {
    check_section(item);
    node_address node;
    node.where = item.where();
    field name = item.require("name");
    node.name = read_new_name(name, "node");
    names.add(name, node.name);
    read_if(item, "host", node.host, read_string);
    field port = item.require("port");
    node.port = read_integer<uint16_t>(port, 1, 65535, "a port number from 1 to 65535");
    addresses.add(port, node.host + ":" + std::to_string(node.port));
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// The backbone takes the data's samples: its input channels and size are
// the samples' (the convnets' flatten width follows from the size, and
// building them refuses one under 8x8; resnet18 takes any size). A
// TorchScript backbone's input is not known before it runs.
void set_sample_shape(const model::data_header& h, topology& t) {
  t.sample_shape = h.shape;
  t.backbone.in_channels = h.shape[0];
  t.backbone.in_height = h.shape[1];
  t.backbone.in_width = h.shape[2];
}

// The jobs of `jobs` that list `key` at `path` ("" the top level), and
// "'path.key'" for errors.
std::vector<std::string> readers_of(const std::vector<job_schema>& jobs, const std::string& path,
                                    const std::string& key) {
  std::vector<std::string> names;
  for (const job_schema& job : jobs)
    if (auto own = job.keys.find(path); own != job.keys.end() && contains(own->second, key))
      names.push_back(job.name);
  return names;
}

// The keys the job says it does not read (job_schema::refusals), a common
// one (backbone.model under job: ist) or another job's, refused with its
// reason before anything reads them: "'backbone.model' is convnet, but ...".
void refuse_unread_keys(const field& root, const topology& t) {
  for (const auto& [dotted, reason] : t.schema->refusals) {
    std::optional<field> f = root;
    std::string segment;
    std::istringstream segments(dotted);
    while (f && std::getline(segments, segment, '.'))
      f = f->node().IsMap() ? f->get(segment) : std::nullopt;
    if (!f)
      continue;
    const YAML::Node& value = f->node();
    f->fail("'" + dotted + "' is " +
            (value.IsScalar() ? shortened(value.Scalar(), max_quoted_bytes)
                              : value.IsSequence() ? "a list" : "a map") +
            ", but " + reason);
  }
}

// A key another job added to a common section (`path`), present here (the
// job's own refusals came first): who reads it.
void refuse_key(const field& f, const std::string& dotted, const job_schema& owner,
                const topology& t) {
  const std::string job = "job: " + owner.name;
  f.fail("'" + dotted + "' is read only by " +
         (owner.readers.empty() ? job : owner.readers + " (" + job + ")") + "; job: " + t.job +
         " does not");
}

// A job's own section is read with that job only, and the keys it adds to
// the common sections (the top level, `backbone`) likewise, unless the job
// also lists them.
void refuse_other_jobs(const field& root, const std::vector<job_schema>& jobs,
                       const topology& t) {
  for (const job_schema& job : jobs)
    if (job.name != t.job && !job.section.empty())
      if (auto f = root.get(job.section); f && !f->is_null())
        f->fail("'" + job.section + "' is only read with job: " + job.name + " (the job is '" +
                t.job + "')");
  for (const job_schema& job : jobs) {
    if (job.name == t.job)
      continue;
    for (const auto& [path, keys] : job.keys) {
      if (section_keys().count(path) == 0)
        continue; // in the job's own section: refused whole above
      std::optional<field> section = path.empty() ? root : root.get(path);
      for (const auto& key : keys)
        if (auto f = section ? section->get(key) : std::nullopt;
            f && !contains(readers_of(jobs, path, key), t.job))
          refuse_key(*f, child_path(path, key), job, t);
    }
  }
}

// Sections are read in dependency order: nodes before any `node:` key, the
// data set before the tasks (label count), tasks before the backbone's
// pretrain task and `task`, the workload before the job's own section.
topology build_topology(const field& root, const std::vector<job_schema>& jobs) {
  check_section(root);
  topology t;
  t.file = root.source().file;
  t.nodes = parse_nodes(root.section("nodes"));
  parse_job(root, jobs, t);
  read_if(root, "seed", t.seed, [](const field& f) {
    return read_integer<uint64_t>(f, 0, std::numeric_limits<uint64_t>::max(),
                                  "a non-negative integer");
  });
  t.plan.seed = t.seed;
  parse_data(root.section("data"), t);
  bool known = true;
  const model::data_header data = check_dataset(root.section("data"), t, known);
  check_normalize(root.section("data"), t, data);
  check_augment(root.section("data"), t, data);
  std::optional<job_length> length = length_of(data, known, t);
  t.tasks = parse_tasks(root.require("tasks"), data.classes, t.data.kind);
  set_sample_shape(data, t);
  refuse_unread_keys(root, t);
  if (auto f = root.get("optimizer")) {
    t.optimizer = read_optimizer(*f, {});
    t.optimizer_where = f->where();
    t.pretrain.optimizer = *t.optimizer;
  }
  std::vector<std::string> layers = parse_backbone(root.section("backbone"), t);
  parse_trained_task(root, t);
  refuse_other_jobs(root, jobs, t);
  t.mode_spec = t.schema->parse(root, layers, t);
  parse_runtime(root.section("runtime"), t.runtime);
  parse_target_accuracy(root, t);
  parse_selection(root, t);
  if (t.schema->length)
    length = t.schema->length(t);
  t.faults = parse_faults(root.section("faults"), length);
  if (t.schema->check)
    t.schema->check(root, t);
  return t;
}

// -- `--set` overrides --------------------------------------------------------------

// The node under `parent` for one path segment of a `--set`, created when
// absent (so an override can add a key the file does not have). Only keys of
// the schema and indexes of its lists are accepted; index == size appends.
YAML::Node step_into(YAML::Node parent, const std::string& parent_path,
                     const std::string& segment, const std::string& where,
                     const source_info& source) {
  bool empty = !parent.IsDefined() || parent.IsNull();
  std::string pattern = pattern_of(parent_path);
  if (is_list(pattern, source)) {
    // "+" appends: `--set faults.+={kind: throw, ...}` adds an entry.
    std::optional<size_t> index =
      segment == "+" ? std::optional<size_t>{empty ? 0 : parent.size()} : parse_index(segment);
    if (!index)
      fail_at(where, quoted(segment) + " is not an index of the list '" + parent_path + "'");
    if (!empty && !parent.IsSequence())
      fail_at(where, "'" + parent_path + "' is not a list in the topology");
    if (*index > parent.size())
      fail_at(where, "index " + segment + " is past the end of '" + parent_path + "' ("
              + std::to_string(parent.size()) + " entries)");
    if (*index == parent.size())
      parent.push_back(YAML::Node(YAML::NodeType::Null));
    return parent[*index];
  }
  auto keys = keys_of(pattern, source);
  if (!keys)
    fail_at(where, "unknown key " + quoted(segment) + " in '" + parent_path
            + "' (it is a value, not a section)");
  if (!contains(*keys, segment))
    fail_at(where, "unknown key " + quoted(segment) + " " + in_section(parent_path)
            + " (expected one of: " + join(*keys) + ")" + hint(did_you_mean(segment, *keys)));
  if (!empty && !parent.IsMap())
    fail_at(where, "'" + parent_path + "' is not a map in the topology");
  return parent[segment];
}

YAML::Node parse_value(const std::string& text, const std::string& where) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail_at(where, "the value is not valid YAML: " + e.msg);
  }
}

// The node at `path` (dotted), walked and created as the schema allows.
// Sections created on the way have no line of their own: they remember the
// override that made them.
YAML::Node walk_to(YAML::Node& doc, const std::string& path, const std::string& origin,
                   source_info& source) {
  YAML::Node current;
  current.reset(doc);
  std::string at, segment;
  std::istringstream segments(path);
  while (std::getline(segments, segment, '.')) {
    YAML::Node next = step_into(current, at, segment, "--set " + path, source);
    if (segment == "+") // the entry it appended
      segment = std::to_string(current.size() - 1);
    at = child_path(at, segment);
    if (next.Mark().is_null())
      source.overrides.emplace(at, origin);
    current.reset(next);
  }
  return current;
}

// Keys that have an older name a file may still use: the parser reads either
// and refuses both. A `--set` of one spelling replaces the other from the
// file, as a `--set` replaces the value it names (issue 32 item 23: shipped
// configs spelt data.dataset, so `--set data.kind=cifar10` was refused).
struct renamed_key {
  const char* current;
  const char* older;
};
constexpr renamed_key renamed_keys[] = {
  {"data.kind", "data.dataset"},
  {"runtime.compute_threads", "runtime.stage_threads"},
  {"target_accuracy", "runtime.stop_at_accuracy"},
};

// Removes the value at dotted `path` from `doc` if it is there (never
// creating a node on the way), and what overrides set below it.
void remove_path(YAML::Node& doc, const std::string& path, source_info& source) {
  YAML::Node parent;
  parent.reset(doc);
  std::string segment, last;
  std::istringstream segments(path);
  std::getline(segments, last, '.');
  while (std::getline(segments, segment, '.')) {
    if (!parent.IsMap() || !static_cast<const YAML::Node&>(parent)[last])
      return;
    YAML::Node next = static_cast<const YAML::Node&>(parent)[last];
    parent.reset(next);
    last = segment;
  }
  if (parent.IsMap() && static_cast<const YAML::Node&>(parent)[last])
    parent.remove(last);
  for (auto it = source.overrides.lower_bound(path);
       it != source.overrides.end()
       && (it->first == path || it->first.compare(0, path.size() + 1, path + ".") == 0);)
    it = source.overrides.erase(it);
}

// The other spelling of `path` (see renamed_keys) is gone from `doc`.
void remove_other_spelling(YAML::Node& doc, const std::string& path, source_info& source) {
  for (const renamed_key& key : renamed_keys) {
    if (path == key.current)
      remove_path(doc, key.older, source);
    else if (path == key.older)
      remove_path(doc, key.current, source);
  }
}

// How errors name the override `text`: "--set a.b=value", cut short as
// values are, since every error in it repeats this.
std::string override_origin(const std::string& text) {
  return "--set " + shortened(text, 128);
}

// Applies one "a.b.c=value" to the document. The paths it touches remember
// the override, so that errors in its value name it instead of a line.
void apply_override(YAML::Node& doc, const std::string& text, source_info& source) {
  const std::string origin = override_origin(text);
  constexpr size_t longest_path = 256; // the schema's longest is ~40
  size_t equals = text.find('=');
  std::string path = text.substr(0, std::min(equals, longest_path + 1));
  if (equals == std::string::npos || path.empty() || path.front() == '.'
      || path.back() == '.' || path.find("..") != std::string::npos)
    fail_at(origin, "expected dotted.key=value (for example data.epochs=3)");
  if (path.size() > longest_path)
    fail_at(origin, "the key is longer than " + std::to_string(longest_path)
                      + " bytes (expected dotted.key=value, for example data.epochs=3)");
  YAML::Node value = parse_value(text.substr(equals + 1), origin);
  remove_other_spelling(doc, path, source);
  YAML::Node target = walk_to(doc, path, origin, source);
  target = value; // yaml-cpp's assignment writes through into the document
  // Paths below `path` that earlier overrides set are gone with their values.
  const std::string below = path + ".";
  auto it = source.overrides.lower_bound(below);
  while (it != source.overrides.end() && it->first.compare(0, below.size(), below) == 0)
    it = source.overrides.erase(it);
  source.overrides[path] = origin;
}

YAML::Node load_document(const std::string& text, const std::string& name) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail_at(name + ":" + std::to_string(std::max(e.mark.line, 0) + 1),
            "YAML syntax error: " + e.msg + " (column " + std::to_string(e.mark.column + 1)
              + ")");
  }
  // An empty file is an empty map, so that `--set` can still add to it.
  if (doc.IsNull())
    doc = YAML::Node(YAML::NodeType::Map);
  return doc;
}

caf::expected<topology> parse_document(const std::string& yaml_text, source_info source,
                                       const std::vector<std::string>& overrides,
                                       const std::vector<job_schema>& jobs) {
  source.jobs = &jobs;
  const std::string& name = source.file;
  try {
    YAML::Node doc = load_document(yaml_text, name);
    field root = field::root(source, doc);
    if (!doc.IsMap())
      root.expected("a map of sections (" + join(*keys_of("", source)) + ")");
    for (const auto& text : overrides)
      apply_override(doc, text, source);
    topology t = build_topology(root, jobs);
    t.text = yaml_text;
    return t;
  } catch (const config_error& e) {
    return make_error(errc::bad_config, e.what());
  } catch (const std::exception& e) {
    // yaml-cpp, LibTorch or the file system failing where no check expected
    // it: still an error value, never an exception out of the parser.
    return make_error(errc::bad_config, name + ": " + e.what());
  }
}

// Every scalar under `node` by dotted path into `out`; an empty map or list,
// or a null, is a value of its own so that adding or removing one shows.
// YAML aliases are expanded here, so nested ones could multiply a small file
// into billions of values: at most max_flattened are.
void flatten(const YAML::Node& node, const std::string& path,
             std::map<std::string, std::string>& out, const std::string& file) {
  constexpr size_t max_flattened = 100000;
  if (out.size() >= max_flattened)
    fail_at(file, "the topology has more than " + std::to_string(max_flattened)
                    + " values once its YAML aliases are expanded");
  if (node.IsMap() && node.size() > 0) {
    for (const auto& kv : node)
      flatten(kv.second, child_path(path, kv.first.Scalar()), out, file);
  } else if (node.IsSequence() && node.size() > 0) {
    for (size_t i = 0; i < node.size(); ++i)
      flatten(node[i], child_path(path, std::to_string(i)), out, file);
  } else {
    out[path] = node.IsScalar() ? node.Scalar() : node.IsMap() ? "{}"
                                                 : node.IsSequence() ? "[]" : "~";
  }
}

} // namespace

caf::expected<std::map<std::string, std::string>>
topology_values(const std::string& yaml_text, const std::string& name,
                const std::vector<std::string>& overrides, const std::vector<job_schema>& jobs) {
  source_info source{name, {}, {}, &jobs};
  try {
    YAML::Node doc = load_document(yaml_text, name);
    for (const auto& text : overrides)
      apply_override(doc, text, source);
    std::map<std::string, std::string> values;
    flatten(doc, "", values, name);
    return values;
  } catch (const config_error& e) {
    return make_error(errc::bad_config, e.what());
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, name + ": " + e.what());
  }
}

caf::expected<topology> parse_topology_as(const std::string& yaml_text, const std::string& path,
                                          const std::vector<std::string>& overrides,
                                          const std::vector<job_schema>& jobs) {
  return parse_document(yaml_text, source_info{path, fs::path(path).parent_path(), {}}, overrides,
                        jobs);
}

const model::task* workload::find_task(const std::string& name) const {
  auto it = std::find_if(tasks.begin(), tasks.end(),
                         [&](const model::task& t) { return t.name == name; });
  return it == tasks.end() ? nullptr : &*it;
}

caf::expected<topology> load_topology(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const std::vector<job_schema>& jobs) {
  std::string text;
  if (std::string why = read_config_file(path, text); !why.empty())
    return make_error(errc::bad_config, "cannot read topology file '" + path + "': " + why);
  return parse_document(text, source_info{path, fs::path(path).parent_path(), {}}, overrides,
                        jobs);
}

caf::expected<topology> parse_topology(const std::string& yaml_text, const std::string& name,
                                       const std::vector<std::string>& overrides,
                                       const std::vector<job_schema>& jobs) {
  // `name` only labels messages (it may be "<embedded ...>"): relative paths
  // are resolved against the working directory.
  return parse_document(yaml_text, source_info{name, {}, {}}, overrides, jobs);
}

topology with_local_nodes(topology t, int32_t count) {
  t.nodes.clear();
  for (int32_t i = 1; i <= count; ++i)
    t.nodes.push_back({"n" + std::to_string(i), "127.0.0.1", 0, ""});
  return t;
}

} // namespace config
} // namespace baton::actors
