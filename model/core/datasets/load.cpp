// load_data and its header-only companions (model/core/dataset.hpp): the
// dispatch over kinds, the classes, the memory budget, the normalisation.

#include <unistd.h>

#include <cstdio>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/core/batches.hpp"
#include "model/core/dataset.hpp"
#include "model/core/datasets/readers.hpp"
#include "model/core/error.hpp"
#include "model/core/log_once.hpp"

namespace baton::model {

using namespace datasets;

namespace {

// Fashion-MNIST's training-set pixel statistics (after scaling to [0, 1]).
constexpr double fashion_mnist_mean = 0.2860;
constexpr double fashion_mnist_std = 0.3530;

constexpr int64_t max_samples = int64_t{1} << 31;
constexpr int64_t max_sample_values = int64_t{1} << 24;

bool is_idx(const data_spec& spec) { return spec.kind == "fashion-mnist" || spec.kind == "idx"; }
bool is_cifar(const data_spec& spec) { return spec.kind == "cifar10" || spec.kind == "cifar100"; }

split_header header_of(const data_spec& spec, split which) {
  if (is_idx(spec))
    return idx_header(spec, which);
  if (is_cifar(spec))
    return cifar_header(spec, which);
  if (spec.kind == "npy")
    return npy_header(spec, which);
  if (spec.kind == "image-folder")
    return image_folder_header(spec, which);
  if (spec.synthetic())
    return {data_shape(spec), which == split::train ? spec.synthetic_train : spec.synthetic_test};
  throw error("unknown data kind '" + spec.kind + "'");
}

int64_t limit_of(const data_spec& spec, split which) {
  if (spec.synthetic())
    return 0;
  return which == split::train ? spec.train_limit : spec.test_limit;
}

int64_t after_limit(const data_spec& spec, split which, int64_t samples) {
  const int64_t limit = limit_of(spec, which);
  return limit > 0 ? std::min(limit, samples) : samples;
}

raw_split read_raw(const data_spec& spec, split which) {
  // At most the limit: each reader reads its files' header itself and
  // takes no more samples than they hold (a header read here first was one
  // more open of every file).
  const int64_t limit = limit_of(spec, which);
  const int64_t count = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  if (is_idx(spec))
    return read_idx(spec, which, count);
  if (is_cifar(spec))
    return read_cifar(spec, which, count);
  if (spec.kind == "npy")
    return read_npy(spec, which, count);
  if (spec.kind == "image-folder")
    return read_image_folder(spec, which, count);
  throw error("unknown data kind '" + spec.kind + "'");
}

/// A training split as read, cut into its training part and the samples
/// held out for validation (validation_split; none without data.validation).
struct raw_training {
  raw_split train;
  raw_split validation;
};

raw_split raw_rows(const raw_split& raw, const std::vector<int64_t>& ids) {
  auto index = torch::tensor(ids, torch::kInt64);
  return {raw.samples.index_select(0, index), raw.labels.index_select(0, index)};
}

raw_training split_training(raw_split raw, const data_spec& spec) {
  if (spec.validation == 0)
    return {std::move(raw), {}};
  const auto ids = validation_split(raw.labels.size(0), spec.validation, spec.seed);
  return {raw_rows(raw, ids.train), raw_rows(raw, ids.validation)};
}

raw_training read_training(const data_spec& spec) {
  return split_training(read_raw(spec, split::train), spec);
}

/// Scaled to float32: uint8 to [0, 1].
at::Tensor to_float(const at::Tensor& samples) {
  return samples.scalar_type() == torch::kUInt8 ? samples.to(torch::kFloat32).div_(255.0)
                                                : samples.to(torch::kFloat32);
}

/// The spec's normalisation, else Fashion-MNIST's, else the training part's
/// own per-channel statistics (`train`, read when needed: the training
/// split less its validation samples, which a run must not have seen).
input_normalisation normalisation_of(const data_spec& spec, const raw_split* train) {
  if (!spec.mean.empty())
    return {spec.mean, spec.std, "data.normalize"};
  if (spec.kind == "fashion-mnist")
    return {{fashion_mnist_mean}, {fashion_mnist_std}, "Fashion-MNIST's published values"};
  raw_training read;
  if (train == nullptr) {
    read = read_training(spec);
    train = &read.train;
  }
  const int64_t channels = train->samples.size(1);
  if (train->samples.size(0) == 0)
    return {std::vector<double>(static_cast<size_t>(channels), 0.0),
            std::vector<double>(static_cast<size_t>(channels), 1.0), "none (no training sample)"};
  // Per channel, in float64: a sum over millions of float32 values drifts.
  auto values =
    to_float(train->samples).transpose(0, 1).reshape({channels, -1}).to(torch::kFloat64);
  auto mean = values.mean(1), stddev = values.std(1, /*unbiased=*/false);
  input_normalisation n;
  n.source = "the training split's " + std::to_string(train->samples.size(0)) + " samples" +
             (spec.validation > 0 ? " (less those held out for validation)" : "");
  for (int64_t c = 0; c < channels; ++c) {
    n.mean.push_back(mean[c].item<double>());
    const double s = stddev[c].item<double>();
    n.std.push_back(s > 0 ? s : 1.0); // a constant channel stays constant, not NaN
  }
  return n;
}

/// (x - mean) / std per channel; one value applies to every channel.
at::Tensor normalise(at::Tensor samples, const input_normalisation& n) {
  auto x = to_float(samples);
  if (n.mean.size() == 1)
    return x.sub_(n.mean[0]).div_(n.std[0]);
  const auto channels = static_cast<int64_t>(n.mean.size());
  if (x.size(1) != channels)
    throw error("data.normalize has " + std::to_string(channels) + " values per channel list, "
                "the samples have " + std::to_string(x.size(1)) + " channels");
  auto mean = torch::tensor(n.mean, torch::kFloat32).view({1, channels, 1, 1});
  auto stddev = torch::tensor(n.std, torch::kFloat32).view({1, channels, 1, 1});
  return x.sub_(mean).div_(stddev);
}

dataset finish(const data_spec& spec, raw_split raw, const input_normalisation& n) {
  dataset out;
  out.name = spec.kind;
  out.normalisation = n;
  out.images = normalise(std::move(raw.samples), n);
  // The files' values are finite (check_finite); a std given so small that
  // they overflow float32 would train to NaN all the same.
  if (!torch::isfinite(out.images).all().item<bool>())
    throw file_error("data.normalize: the samples are not finite once normalised (a std too "
                     "small for float32?): expected a std near the data's own");
  out.labels = std::move(raw.labels);
  out.classes = data_classes(spec);
  return out;
}

/// A synthetic set's normalisation: data.normalize's, else none (its
/// values are made near mean 0, std 1).
input_normalisation synthetic_normalisation(const data_spec& spec) {
  if (!spec.mean.empty())
    return {spec.mean, spec.std, "data.normalize"};
  return {{0.0}, {1.0}, "none (synthetic values)"};
}

dataset synthetic_split(const data_spec& spec, split which) {
  const auto shape = data_shape(spec);
  auto data = make_synthetic(which == split::train ? spec.synthetic_train : spec.synthetic_test,
                             shape[0], shape[1], shape[2], data_classes(spec),
                             which == split::train ? spec.seed : spec.seed + 1);
  data.normalisation = synthetic_normalisation(spec);
  if (!spec.mean.empty())
    data.images = normalise(data.images, data.normalisation);
  return data;
}

/// `data`'s rows `ids`, as a dataset of its own.
dataset dataset_rows(const dataset& data, const std::vector<int64_t>& ids) {
  dataset out = data;
  std::tie(out.images, out.labels) = gather(data, ids);
  return out;
}

/// A synthetic training split's parts (the made set, then held out).
std::pair<dataset, dataset> synthetic_training(const data_spec& spec) {
  dataset all = synthetic_split(spec, split::train);
  if (spec.validation == 0)
    return {std::move(all), {}};
  const auto ids = validation_split(all.size(), spec.validation, spec.seed);
  return {dataset_rows(all, ids.train), dataset_rows(all, ids.validation)};
}

/// The training part carries the augmentation (gather_training).
dataset& with_augmentation(dataset& train, const data_spec& spec) {
  train.augment = spec.augment;
  train.augment_seed = derive_seed(spec.seed, "augment");
  return train;
}

/// MiB as a user reads them: 3.5, 0.25, 2, 4096.
std::string mib_text(double mib) {
  if (mib >= 10)
    return std::to_string(static_cast<int64_t>(mib));
  char text[32];
  std::snprintf(text, sizeof text, "%.2g", mib);
  return text;
}

std::string values_text(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%.6g", out.empty() ? "" : ", ", v);
    out += text;
  }
  return values.size() == 1 ? out : "[" + out + "]";
}

/// What a run trains on: a user deploying the model needs the exact
/// normalisation (the exported module carries it too).
void log_loaded(const data_spec& spec, const std::string& which, const dataset& data) {
  std::vector<int64_t> shape(data.images.sizes().begin() + 1, data.images.sizes().end());
  const auto& n = data.normalisation;
  log_once(fmt::format(
    "data: {} {} split: {} samples of {}, {} classes; normalised (x{} - mean) / std, mean {}, "
    "std {} ({})",
    spec.kind, which, data.size(), shape_text(shape), data.classes,
    spec.synthetic() ? "" : " [/ 255 for uint8 samples]", values_text(n.mean),
    values_text(n.std), n.source));
}

} // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

namespace datasets {

std::string split_name(split which) { return which == split::train ? "train" : "test"; }

void check_labels(const at::Tensor& labels, int64_t classes, const std::string& file,
                  int64_t first) {
  const auto bad = (labels < 0).logical_or(labels >= classes).nonzero();
  if (bad.size(0) == 0)
    return;
  const int64_t i = bad[0][0].item<int64_t>();
  throw file_error(file + ": label " + std::to_string(labels[i].item<int64_t>()) + " at index " +
                   std::to_string(first + i) + " out of range, expected 0.." +
                   std::to_string(classes - 1) + " (" + std::to_string(classes) + " classes)");
}

void check_finite(const at::Tensor& samples, const std::string& file) {
  if (!samples.is_floating_point() || samples.size(0) == 0)
    return;
  const auto bad = torch::isfinite(samples).reshape({samples.size(0), -1}).all(1).logical_not();
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0)
    return;
  const int64_t first = bad.nonzero()[0][0].item<int64_t>();
  throw file_error(file + ": " + std::to_string(count) + " of " +
                   std::to_string(samples.size(0)) + " samples hold NaN or infinite values, " +
                   "the first is sample " + std::to_string(first) +
                   " (expected finite numbers: training on them ends in NaN weights)");
}

void check_sample_count(int64_t samples, const std::vector<int64_t>& shape,
                        const std::string& file) {
  int64_t values = 1;
  for (auto d : shape) {
    if (d < 1 || d > max_sample_values)
      throw file_error(file + ": samples of shape " + shape_text(shape) +
                       ", expected every dimension from 1 to 16777216");
    values *= d;
    if (values > max_sample_values)
      throw file_error(file + ": samples of shape " + shape_text(shape) +
                       " have more than 2^24 values each");
  }
  if (samples > max_samples)
    throw file_error(file + ": declares " + std::to_string(samples) + " samples, expected at "
                     "most 2^31");
}

} // namespace datasets

double default_memory_mb() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0)
    return 4096;
  return static_cast<double>(pages) * static_cast<double>(page) / (1 << 20) / 2;
}

std::vector<int64_t> data_shape(const data_spec& spec) {
  if (spec.synthetic())
    return spec.shape.empty() ? std::vector<int64_t>{1, 28, 28} : spec.shape;
  if (spec.kind == "image-folder" && !spec.shape.empty())
    return spec.shape;
  return header_of(spec, split::train).shape;
}

int64_t data_size(const data_spec& spec, split which) {
  const int64_t samples = after_limit(spec, which, header_of(spec, which).samples);
  return which == split::train ? samples - validation_size(samples, spec.validation) : samples;
}

int64_t data_classes(const data_spec& spec) {
  if (spec.classes > 0)
    return spec.classes;
  if (spec.kind == "cifar100")
    return spec.label == "coarse" ? 20 : 100;
  if (spec.kind == "npy")
    return npy_classes(spec);
  if (spec.kind == "image-folder")
    return static_cast<int64_t>(image_folder_classes(spec).size());
  return 10; // fashion-mnist, idx (MNIST, KMNIST), cifar10, synthetic
}

namespace {

/// Where a split's samples are: its file, or its folder.
std::string split_files_of(const data_spec& spec, split which) {
  const auto& files = which == split::train ? spec.train : spec.test;
  if (spec.kind == "npy")
    return files.x;
  if (is_idx(spec))
    return files.x.empty() || files.x.front() == '/' ? files.x : spec.path + "/" + files.x;
  if (spec.kind == "image-folder")
    return spec.path + "/" + split_name(which);
  return spec.path;
}

/// A split without samples is refused: an empty training split trains
/// nothing, an empty test split would report an accuracy of 0 % measured
/// on nothing (every run reports its test accuracy).
void check_not_empty(const data_spec& spec, const split_header& h, split which) {
  if (h.samples > 0)
    return;
  throw file_error(split_files_of(spec, which) + ": the " + split_name(which) +
                   " split has no samples (expected at least one: " +
                   (which == split::train ? "a run trains on them"
                                          : "a run reports its test accuracy on them") +
                   ")");
}

/// data.shape, where given for files that say their own shape, must be
/// theirs: a listed node's models are built for the declared one.
void check_declared_shape(const data_spec& spec, const split_header& h, split which) {
  if (spec.shape.empty() || h.shape == spec.shape)
    return;
  throw file_error("the " + split_name(which) + " split's samples are " + shape_text(h.shape) +
                   ", data.shape says " + shape_text(spec.shape) +
                   " (give the files' shape, or leave data.shape out where they are read)");
}

} // namespace

data_header read_data_header(const data_spec& spec) {
  data_header h;
  const split_header train = header_of(spec, split::train);
  check_declared_shape(spec, train, split::train);
  check_not_empty(spec, train, split::train);
  h.shape = train.shape;
  const int64_t training = after_limit(spec, split::train, train.samples);
  h.validation = validation_size(training, spec.validation);
  h.train = training - h.validation;
  const split_header test = header_of(spec, split::test);
  if (test.shape != train.shape)
    throw file_error("the test split's samples are " + shape_text(test.shape) +
                     ", the training split's " + shape_text(train.shape) +
                     " (expected the same shape)");
  check_not_empty(spec, test, split::test);
  h.test = after_limit(spec, split::test, test.samples);
  h.classes = data_classes(spec);
  check_memory(spec, h);
  return h;
}

void check_memory(const data_spec& spec, const data_header& h) {
  const double budget = spec.memory_mb > 0 ? spec.memory_mb : default_memory_mb();
  int64_t values = 1;
  for (auto d : h.shape)
    values *= d;
  const int64_t training = h.train + h.validation;
  const double needed =
    static_cast<double>(training + h.test) * static_cast<double>(values) * 4 / (1 << 20);
  if (needed > budget)
    throw error("the dataset needs " + mib_text(needed) +
                " MiB in memory (" + std::to_string(training) + " training and " +
                std::to_string(h.test) + " test samples of " + shape_text(h.shape) +
                " float32), more than its budget data.memory_mb = " +
                mib_text(budget) + " MiB" +
                (spec.memory_mb > 0 ? "" : " (half of this machine's memory)") +
                "; lower data.train_limit / data.test_limit or raise data.memory_mb");
}

dataset load_data(const data_spec& spec, split which) {
  // This split's own headers: a test split loads without the training
  // files where its normalisation is known (given, or Fashion-MNIST's).
  const split_header own = header_of(spec, which);
  check_declared_shape(spec, own, which);
  check_not_empty(spec, own, which);
  data_header h;
  h.shape = own.shape;
  (which == split::train ? h.train : h.test) = after_limit(spec, which, own.samples);
  check_memory(spec, h);
  dataset out;
  if (spec.synthetic()) {
    out = which == split::train ? synthetic_training(spec).first : synthetic_split(spec, which);
  } else if (which == split::train) {
    raw_training raw = read_training(spec);
    const auto n = normalisation_of(spec, &raw.train);
    out = finish(spec, std::move(raw.train), n);
  } else {
    const auto n = normalisation_of(spec, nullptr);
    out = finish(spec, read_raw(spec, which), n);
  }
  if (which == split::train)
    with_augmentation(out, spec);
  log_loaded(spec, split_name(which), out);
  return out;
}

data_splits load_splits(const data_spec& spec) {
  read_data_header(spec); // checks the memory budget before reading a sample
  data_splits out;
  if (spec.synthetic()) {
    std::tie(out.train, out.validation) = synthetic_training(spec);
    out.test = synthetic_split(spec, split::test);
  } else {
    raw_training train = read_training(spec);
    const auto n = normalisation_of(spec, &train.train);
    raw_split test = read_raw(spec, split::test);
    out.train = finish(spec, std::move(train.train), n);
    if (spec.validation > 0)
      out.validation = finish(spec, std::move(train.validation), n);
    out.test = finish(spec, std::move(test), n);
  }
  with_augmentation(out.train, spec);
  log_loaded(spec, "train", out.train);
  if (spec.validation > 0)
    log_loaded(spec, "validation", out.validation);
  log_loaded(spec, "test", out.test);
  return out;
}

input_normalisation data_normalisation(const data_spec& spec) {
  if (spec.synthetic())
    return synthetic_normalisation(spec);
  return normalisation_of(spec, nullptr);
}

} // namespace baton::model
