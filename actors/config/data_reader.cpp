// The workload's data section: the kind, files, shape, limits,
// normalisation, validation and augmentation (its field list), then what
// the data's files say (their headers only: shape, classes, sizes) checked
// against it, and the job's length in steps.

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/config/section_fields.hpp"
#include "actors/config/topology_parts.hpp"
#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

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

// A split's files as data.kind reads them: idx names them relative to
// data.dir, npy gives paths (relative to the topology file) to x and y.
struct split_reading {
  const std::string& kind;
  model::data_spec::split_files& files;
};

// `data.KEY.KEY2` of the other kind of files is refused.
void refuse_other_files(const field& f, const split_reading& s, bool npy_key) {
  if ((s.kind == "npy") != npy_key)
    f.fail(f.name() + " is not read with data.kind " + s.kind + " (expected " +
           (s.kind == "npy" ? "x and y" : "images and labels") + ")");
}

const section_fields<split_reading>& split_fields() {
  static const section_fields<split_reading> fields{
    {
      {"images", [](const field& f, const field&, split_reading& s) {
         refuse_other_files(f, s, false);
         s.files.x = read_string(f);
       }},
      {"labels", [](const field& f, const field&, split_reading& s) {
         refuse_other_files(f, s, false);
         s.files.y = read_string(f);
       }},
      {"x", [](const field& f, const field&, split_reading& s) {
         refuse_other_files(f, s, true);
         s.files.x = read_path(f);
       }},
      {"y", [](const field& f, const field&, split_reading& s) {
         refuse_other_files(f, s, true);
         s.files.y = read_path(f);
       }},
    },
    [](const field& split, split_reading& s) {
      if (s.kind == "npy") {
        split.require("x");
        split.require("y");
      }
    }};
  return fields;
}

// `data.train` / `data.test`: a split's files (data.kind idx and npy only).
void read_split_files(const field& f, topology& t, model::data_spec::split_files& files) {
  if (!names_files(t.data.kind))
    f.fail(f.name() + " applies to data.kind idx and npy only (the kind is '" + t.data.kind
           + "')");
  split_reading split{t.data.kind, files};
  split_fields().read(f, split);
}

// One value per channel (or one for all), std positive.
std::vector<double> read_channel_values(const field& values, bool positive) {
  std::vector<double> out;
  for (const field& v : values.items("a list of numbers, one per channel", 64))
    out.push_back(read_number(v, positive ? "a positive number" : "a number",
                              [&](double x) { return !positive || x > 0; }));
  if (out.empty())
    values.fail(values.name() + " must have one number per channel, got none");
  return out;
}

// `data.normalize: {mean: [..], std: [..]}`.
const section_fields<model::data_spec>& normalize_fields() {
  using spec = model::data_spec;
  static const section_fields<spec> fields{
    {
      {"mean",
       [](const field& f, const field&, spec& d) { d.mean = read_channel_values(f, false); },
       true},
      {"std", [](const field& f, const field&, spec& d) { d.std = read_channel_values(f, true); },
       true},
    },
    [](const field& section, spec& d) {
      if (d.mean.size() == d.std.size())
        return;
      field std = section.require("std");
      std.fail(std.name() + " has " + std::to_string(d.std.size()) + " values, mean has "
               + std::to_string(d.mean.size()) + " (expected one per channel in each)");
    }};
  return fields;
}

// `data.augment`: crop, flip.
const section_fields<model::data_spec::augment_spec>& augment_fields() {
  using spec = model::data_spec::augment_spec;
  static const section_fields<spec> fields{{
    {"crop", [](const field& f, const field&, spec& a) {
       a.crop = read_integer<int64_t>(f, 0, 1 << 20, "a number of pixels from 0");
     }},
    {"flip", [](const field& f, const field&, spec& a) { a.flip = read_bool(f); }},
  }};
  return fields;
}

// What is checked across the data section's keys once they are read: the
// directory a kind reads, the files npy needs, the size of a synthetic set.
void check_data_section(const field& data, topology& t) {
  const std::string& k = t.data.kind;
  if (k != "fashion-mnist" && reads_dir(k) && !data.get("dir")) {
    std::optional<field> kind = data.get("kind");
    (kind ? *kind : data).fail("data.kind is " + k + " but 'data.dir' is not given");
  }
  if (k == "npy")
    for (const char* key : {"train", "test"})
      if (!data.get(key))
        data.fail(std::string("data.kind is npy but 'data.") + key
                  + "' is not given (expected {x: X.npy, y: Y.npy})");
  check_synthetic_size(data, "synthetic_train", t);
  check_synthetic_size(data, "synthetic_test", t);
}

// The data section, in the order it is read: the kind first (the keys
// after it depend on it), the microbatches last (bounded by the batch size).
const section_fields<topology>& data_fields() {
  static const section_fields<topology> fields{
    {
      // The older name of data.kind (fashion-mnist or synthetic); not both.
      {"dataset", [](const field& f, const field& data, topology& t) {
         if (auto kind = data.get("kind"))
           kind->fail("give data.kind or data.dataset, not both (data.dataset is its older "
                      "name)");
         t.data.kind = read_choice(f, {"fashion-mnist", "synthetic"});
       }},
      {"kind", [](const field& f, const field&, topology& t) {
         t.data.kind = read_choice(f, {"fashion-mnist", "idx", "cifar10", "cifar100", "npy",
                                       "image-folder", "synthetic"});
         if (t.data.kind == "npy")
           t.data.train = t.data.test = {};
       }},
      // A synthetic set ignores data.dir, so that `--set data.dataset=synthetic`
      // works over a file that names a directory (as it always has).
      {"dir", [](const field& f, const field&, topology& t) {
         if (t.data.kind == "npy")
           f.fail("'data.dir' is not read with data.kind npy (give data.train and data.test: "
                  "{x: X.npy, y: Y.npy})");
         t.data.path = read_path(f);
       }},
      {"train", [](const field& f, const field&, topology& t) {
         read_split_files(f, t, t.data.train);
       }},
      {"test", [](const field& f, const field&, topology& t) {
         read_split_files(f, t, t.data.test);
       }},
      {"label", [](const field& f, const field&, topology& t) {
         if (t.data.kind != "cifar100")
           f.fail("'data.label' applies to data.kind cifar100 only (the kind is '" + t.data.kind
                  + "')");
         t.data.label = read_choice(f, {"fine", "coarse"});
       }},
      // data.shape (image-folder: the size every image is resized to; other
      // file kinds: what the samples are, checked when they are read) and
      // data.synthetic_shape (synthetic: the samples made).
      {"synthetic_shape", [](const field& f, const field&, topology& t) {
         if (!t.data.synthetic())
           f.fail(f.name() + " applies to data.dataset: synthetic only (the dataset is '"
                  + t.data.kind + "')");
         t.data.shape = read_sample_shape(f);
       }},
      {"shape", [](const field& f, const field&, topology& t) {
         if (t.data.synthetic())
           f.fail("'data.shape' is data.synthetic_shape for data.kind synthetic");
         t.data.shape = read_sample_shape(f);
       }},
      {"classes", [](const field& f, const field&, topology& t) {
         t.data.classes =
           read_integer<int64_t>(f, 1, int64_t{1} << 20, "a number of classes from 1 to 2^20");
       }},
      {"normalize", [](const field& f, const field&, topology& t) {
         normalize_fields().read(f, t.data);
       }},
      {"memory_mb", [](const field& f, const field&, topology& t) {
         t.data.memory_mb =
           read_number(f, "a positive number of MiB", [](double x) { return x > 0; });
       }},
      {"train_limit", [](const field& f, const field&, topology& t) {
         t.data.train_limit = non_negative_int64(f);
       }},
      {"test_limit", [](const field& f, const field&, topology& t) {
         t.data.test_limit = non_negative_int64(f);
       }},
      {"batch_size", [](const field& f, const field&, topology& t) {
         t.plan.batch_size = positive_int64(f);
       }},
      {"epochs", [](const field& f, const field&, topology& t) {
         t.plan.epochs = positive_int32(f);
       }},
      {"synthetic_train", [](const field& f, const field&, topology& t) {
         t.data.synthetic_train = positive_int64(f);
       }},
      {"synthetic_test", [](const field& f, const field&, topology& t) {
         t.data.synthetic_test = positive_int64(f);
       }},
      {"node", [](const field& f, const field&, topology& t) {
         t.source_node = read_node(f, t.nodes);
       }},
      {"validation", [](const field& f, const field&, topology& t) {
         t.data.validation =
           read_number(f, "a fraction of the training samples above 0 and below 1 (0.1 for 10%)",
                       [](double x) { return x > 0 && x < 1; });
       }},
      {"augment", [](const field& f, const field&, topology& t) {
         augment_fields().read(f, t.data.augment);
       }},
      {"microbatches", [](const field& f, const field&, topology& t) {
         auto most = static_cast<int32_t>(
           std::min<int64_t>(t.plan.batch_size, std::numeric_limits<int32_t>::max()));
         t.plan.microbatches = read_integer<int32_t>(
           f, 1, most, "an integer from 1 to the batch size (" + std::to_string(most) + ")");
       }},
    },
    check_data_section};
  return fields;
}

void parse_data(const field& data, topology& t) {
  t.data.seed = t.plan.seed;
  data_fields().read(data, t);
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
                           t.schema->reads_data_on.empty()
                             ? "they are read on the source's node, data.node"
                             : t.schema->reads_data_on);
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
std::optional<job_length> length_of(const model::data_header& data, bool known, const topology& t) {
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

// `data.augment`: image samples only, and a crop that keeps part of each
// (checked once their shape is known).
void check_augment(const field& data, const topology& t, const model::data_header& h) {
  if (!t.data.augment.any())
    return;
  if (auto why = model::augment_refusal(t.data.augment, t.data.kind, h.shape); !why.empty())
    data.require("augment").fail(why);
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

} // namespace

detail::data_reading detail::read_data(const field& data, topology& t) {
  parse_data(data, t);
  bool known = true;
  const model::data_header header = check_dataset(data, t, known);
  check_normalize(data, t, header);
  check_augment(data, t, header);
  set_sample_shape(header, t);
  if (known) {
    t.training_samples = header.train;
    t.data_header = header;
  }
  return {header.classes, length_of(header, known, t)};
}

std::map<std::string, std::vector<std::string>> detail::data_section_keys() {
  return {{"data", data_fields().keys()},
          {"data.augment", augment_fields().keys()},
          {"data.train", split_fields().keys()},
          {"data.test", split_fields().keys()},
          {"data.normalize", normalize_fields().keys()}};
}

} // namespace config
} // namespace baton::actors
