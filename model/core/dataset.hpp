#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/specs.hpp"

namespace baton::model {

enum class split { train, test };

/// A labelled image dataset held in memory.
struct dataset {
  std::string name;   ///< its kind: "fashion-mnist", "synthetic", "cifar10", ...
  at::Tensor images;  ///< float32 [N, C, H, W], normalised (mean 0, std ~1)
  at::Tensor labels;  ///< int64 [N], class ids from 0
  int64_t classes = 0;
  input_normalisation normalisation; ///< what made `images` of the raw samples
  /// How its training batches are augmented (gather_training, augment.hpp):
  /// the training part's data.augment, nothing on the other splits.
  data_spec::augment_spec augment;
  uint64_t augment_seed = 0; ///< derive_seed(data_spec::seed, "augment")
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

/// A workload's data as every strategy reads it: the training split less
/// the samples held out for validation, those (empty without
/// data.validation) and the test split, all normalised alike.
struct data_splits {
  dataset train;
  dataset validation;
  dataset test;
};

/// The samples of a training split of `samples` held out for validation
/// (data.validation = `fraction`), and the others: each list in increasing
/// order, disjoint, together every id in [0, samples) once. Validation has
/// round(fraction x samples) of them, chosen by a seeded shuffle: a pure
/// function of (samples, fraction, seed), so every strategy, layout and
/// process holds out the same ones. fraction 0: no validation. Throws
/// model::error unless 0 <= fraction < 1, or when either part would be
/// empty (naming the sizes).
struct validation_ids {
  std::vector<int64_t> train;
  std::vector<int64_t> validation;
};
validation_ids validation_split(int64_t samples, double fraction, uint64_t seed);

/// How many of `samples` validation_split holds out (its checks included).
int64_t validation_size(int64_t samples, double fraction);

/// Debian's dataset-fashion-mnist location.
inline constexpr const char* default_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

/// Reads the headers of both splits, checks they agree and that the data
/// fits in `spec.memory_mb`. Throws model::file_error naming the file on a
/// missing or corrupt one, model::error over the budget.
data_header read_data_header(const data_spec& spec);

/// [C, H, W] of one sample (a synthetic set's or a resized image folder's
/// from the spec, the others' from their training split's headers).
std::vector<int64_t> data_shape(const data_spec& spec);

/// A sample's shape as messages name it: "1x28x28".
std::string shape_text(const std::vector<int64_t>& shape);

/// The samples of a split, after its limit, from its headers (the training
/// split less its validation samples).
int64_t data_size(const data_spec& spec, split which);

/// The classes: spec.classes, else the kind's (data_spec::classes).
int64_t data_classes(const data_spec& spec);

/// Throws model::error when the float32 samples of `h` exceed the spec's
/// memory budget (data_spec::memory_mb), naming the budget and the size.
void check_memory(const data_spec& spec, const data_header& h);

/// Half of this machine's physical memory in MiB: the default memory budget.
double default_memory_mb();

/// Reads a split (its first train_limit / test_limit samples; the training
/// split less its validation samples), checks its
/// labels against the classes (an out-of-range label names its file and
/// index) and normalises it (data_spec::mean; computed from the training
/// part when absent, which then reads it too). Throws model::file_error
/// naming the file on a missing, truncated or corrupt file.
dataset load_data(const data_spec& spec, split which);

/// The training part, its validation samples (data_spec::validation,
/// validation_split) and the test split, all normalised with the training
/// part's statistics (never the validation samples'), reading each file
/// once; the training part carries data_spec::augment. Logs what it read
/// (kind, samples, shape, classes) and the normalisation.
data_splits load_splits(const data_spec& spec);

/// The normalisation load_splits applies to `spec`'s data (reading the
/// training split when it is computed from it): what an exported model
/// applies to raw samples.
input_normalisation data_normalisation(const data_spec& spec);

/// Fashion-MNIST from the IDX `.gz` files in `dir` (train-images-idx3-ubyte.gz,
/// ...): load_data of kind "fashion-mnist". `limit` > 0 keeps the first
/// `limit` samples.
dataset load_fashion_mnist(const std::string& dir, split which, int64_t limit = 0);

/// The samples of a Fashion-MNIST split in `dir`, from its IDX headers.
int64_t fashion_mnist_size(const std::string& dir, split which);

/// A deterministic synthetic dataset: `n` samples of shape [c, h, w] with
/// labels in [0, classes), seeded; labels are learnable (class-dependent mean).
dataset make_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed);

/// The sample order of `epoch`: a permutation of [0, n) that depends only on
/// (n, seed, epoch). Same inputs, same order, on every machine.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int32_t epoch);

/// The `index`-th of `count` contiguous shards of `order` (sizes differ by at
/// most one).
std::vector<int64_t> shard(const std::vector<int64_t>& order, int32_t index, int32_t count);

/// Gathers the samples `ids` of `data` into a batch: images [B, C, H, W],
/// labels [B].
std::pair<at::Tensor, at::Tensor> gather(const dataset& data, const std::vector<int64_t>& ids);

} // namespace baton::model
