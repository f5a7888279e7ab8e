#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace baton::model {

enum class split { train, test };

/// A labelled image dataset held in memory.
struct dataset {
  std::string name;   ///< "fashion-mnist", "synthetic", "cifar10"
  at::Tensor images;  ///< float32 [N, C, H, W], normalised (mean 0, std ~1)
  at::Tensor labels;  ///< int64 [N], class ids from 0
  int64_t classes = 0;
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

/// Classes of Fashion-MNIST (and of CIFAR-10): labels 0..9.
inline constexpr int64_t fashion_mnist_classes = 10;

/// Classes of the synthetic dataset a job's source makes (make_synthetic's
/// `classes`): ten, like the datasets it stands in for.
inline constexpr int64_t synthetic_classes = 10;

/// The classes of the dataset a topology names ("fashion-mnist",
/// "synthetic"): how many entries a task's label map has. 0 for a name it
/// does not know.
int64_t dataset_classes(const std::string& name);

/// Debian's dataset-fashion-mnist location.
inline constexpr const char* default_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

/// Reads Fashion-MNIST from the IDX `.gz` files in `dir`
/// (train-images-idx3-ubyte.gz, ...). `limit` > 0 keeps the first `limit`
/// samples. Throws model::error naming the file on a missing or corrupt file.
dataset load_fashion_mnist(const std::string& dir, split which, int64_t limit = 0);

/// The number of samples of a Fashion-MNIST split in `dir`, read from the
/// IDX headers of its images and labels files only (a few bytes each), so
/// that a missing or corrupt file is found before a job starts. Throws
/// model::error naming the file, as load_fashion_mnist would.
int64_t fashion_mnist_size(const std::string& dir, split which);

/// A deterministic synthetic dataset: `n` samples of shape [c, h, w] with
/// labels in [0, classes), seeded; labels are learnable (class-dependent mean).
dataset make_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed);

/// Reads CIFAR-10 binary-format files (each record: 1 label byte, 3072 pixel
/// bytes). Throws model::error on a truncated file.
dataset load_cifar10_binary(const std::vector<std::string>& files, int64_t limit = 0);

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
