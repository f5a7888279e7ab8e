#pragma once

// The readers of each dataset kind (model/core/datasets/*.cpp), behind
// load_data (dataset.hpp): each reads its files into raw samples and labels
// and says what its headers declare; load.cpp checks the labels and the
// memory budget and normalises. Internal to model/core.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/core/dataset.hpp"
#include "model/core/specs.hpp"

namespace baton::model::datasets {

/// What a split's headers declare, read without its samples.
struct split_header {
  std::vector<int64_t> shape; ///< [C, H, W] of one sample
  int64_t samples = 0;        ///< in the files, before any limit
};

/// A split as read: samples uint8 or float32 [N, C, H, W] (not normalised),
/// labels int64 [N] in [0, classes).
struct raw_split {
  at::Tensor samples;
  at::Tensor labels;
};

/// "train" or "test".
std::string split_name(split which);

/// Throws file_error naming `file` and the index (`first` + i) of the
/// first of `labels` (int64) outside [0, classes) (load.cpp).
void check_labels(const at::Tensor& labels, int64_t classes, const std::string& file,
                  int64_t first = 0);

/// Throws file_error naming `file`, how many of `samples` (float32 [N, ...])
/// hold a NaN or an infinity and the index of the first: training on them
/// ends in NaN weights (load.cpp). Other types cannot hold either.
void check_finite(const at::Tensor& samples, const std::string& file);

/// Throws file_error unless `size` bytes can be read from `file` at once:
/// a corrupt header must not become a multi-gigabyte allocation (load.cpp).
void check_sample_count(int64_t samples, const std::vector<int64_t>& shape,
                        const std::string& file);

// -- idx: Fashion-MNIST, MNIST, KMNIST, EMNIST (idx.cpp) -----------------------

split_header idx_header(const data_spec& spec, split which);
/// The first `count` samples, or as many as the files hold when fewer (so
/// do the readers below).
raw_split read_idx(const data_spec& spec, split which, int64_t count);

// -- cifar10, cifar100 (cifar.cpp) ---------------------------------------------

split_header cifar_header(const data_spec& spec, split which);
raw_split read_cifar(const data_spec& spec, split which, int64_t count);

// -- npy (npy.cpp) -------------------------------------------------------------

split_header npy_header(const data_spec& spec, split which);
raw_split read_npy(const data_spec& spec, split which, int64_t count);
/// 1 + the largest label of the training y file (the npy kind's classes).
int64_t npy_classes(const data_spec& spec);

// -- image-folder (image_folder.cpp) -------------------------------------------

split_header image_folder_header(const data_spec& spec, split which);
raw_split read_image_folder(const data_spec& spec, split which, int64_t count);
/// The class folders of the training split, sorted: class k is the k-th.
std::vector<std::string> image_folder_classes(const data_spec& spec);

} // namespace baton::model::datasets
