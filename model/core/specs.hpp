#pragma once

// What a topology says about the model, plain data free of LibTorch: the
// config, runtime and roles hold these and pass them on; model/ builds and
// trains from them (layered_model.hpp, training.hpp, task.hpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace baton::model {

/// The settings of layer freezing's adaptive rule (freezing.hpp): `freeze:
/// {policy: adaptive, interval: N, percentile: P, max_frozen: M}`.
struct adaptive_freeze_options {
  int32_t interval = 50;    ///< steps between two decisions
  double percentile = 50;   ///< in [0, 100]
  int32_t max_frozen = -1;  ///< most groups ever frozen; -1: all freezable groups
};

/// What to build: a reference model by name, or a TorchScript file.
struct model_spec {
  /// "convnet" (backbone, 16 layers: conv1 relu1 conv2 relu2 pool1 conv3 relu3
  /// conv4 relu4 pool2 conv5 relu5 pool3 flatten fc1 relu6 -> 256 features),
  /// "convnet_wide" (same, fc1 is 1152->`wide_features` then fc1b ->256),
  /// "resnet18" (torchvision's ResNet-18 without its fc, `in_channels` input
  /// channels: its stem convolution takes them; 3 gives torchvision's,
  /// 14 layers: conv1 bn1 relu maxpool layer1_0 layer1_1 layer2_0 layer2_1
  /// layer3_0 layer3_1 layer4_0 layer4_1 avgpool flatten -> 512 features;
  /// each layerN_k is one BasicBlock),
  /// "classifier" (linear `features` -> classes),
  /// "head" (linear `features`->128 relu linear 128->classes),
  /// "mlp", "torchscript"; make_model builds these. A strategy's own
  /// network carries its name here too and is built by that strategy's
  /// model library (model/ist_mlp/mlp.hpp's "ist_mlp").
  std::string name = "convnet";
  int64_t classes = 10;            ///< output classes (classifier, head)
  int64_t features = 256;          ///< input width (classifier, head): backbone_features()
  int64_t in_channels = 1;         ///< input channels of convnet, convnet_wide, mlp and
                                   ///< resnet18 (set it to 3 for torchvision's resnet18)
  int64_t in_height = 28;          ///< input height of convnet, convnet_wide (at least 8) and mlp
  int64_t in_width = 28;           ///< input width of convnet, convnet_wide (at least 8) and mlp
  int64_t wide_features = 32768;   ///< convnet_wide hidden width
  std::vector<int64_t> hidden{4096}; ///< hidden widths, one per hidden layer, of a
                                     ///< strategy's network (model/ist's ist_mlp)
  std::string path;                ///< torchscript file (name == "torchscript")
  /// Whether a torchscript model gets a classifier (fc2, Linear(outputs ->
  /// classes)) on top: "auto" when its output width is not the task's
  /// classes, "append" always (backbone.classifier).
  std::string classifier = "auto";
  uint64_t seed = 0;               ///< initialisation seed
};

/// How raw samples become a dataset's images: uint8 values over 255, others
/// as they are, then (x - mean) / std, one value for every channel or one
/// per channel.
struct input_normalisation {
  std::vector<double> mean;
  std::vector<double> std;
  std::string source; ///< "data.normalize", "Fashion-MNIST's published values", ...
};

/// Where the samples come from and how they are read (the topology's
/// `data:` section, docs/data.md). Kinds:
/// - "fashion-mnist": the IDX files of Fashion-MNIST in `path` (28x28, ten
///   classes, normalised with Fashion-MNIST's own mean and std);
/// - "idx": IDX files (MNIST, KMNIST, EMNIST, ...) named by `train`/`test`,
///   gzip-compressed or raw, images [N, H, W] or [N, C, H, W];
/// - "cifar10", "cifar100": their binary format in `path` (data_batch_1..5.bin
///   and test_batch.bin; train.bin and test.bin), cifar100 with its `label`;
/// - "npy": numpy `.npy` files, X [N, H, W] or [N, C, H, W] as uint8 or
///   float32 and y [N] as integers, named by `train`/`test`;
/// - "image-folder": `path`/train/<class>/*.png|jpg and `path`/test/<class>/...,
///   resized to `shape`;
/// - "synthetic": made in memory (make_synthetic), `shape` and ten classes.
/// Relative paths are resolved by the config that reads them.
struct data_spec {
  /// Training-time augmentation of image samples (`data.augment`): applied
  /// to the training part only, by model::augment (model/core/augment.hpp).
  struct augment_spec {
    int64_t crop = 0;  ///< pad by this many pixels, then crop back at a random offset; 0: off
    bool flip = false; ///< mirror left-right with probability 1/2
    bool any() const { return crop > 0 || flip; }
  };
  /// The files of one split: idx images and labels, npy x and y (for idx,
  /// relative to `path`).
  struct split_files {
    std::string x; ///< images (idx) or samples (npy)
    std::string y; ///< labels
  };
  std::string kind = "fashion-mnist";
  std::string path = "/usr/share/datasets/fashion-mnist"; ///< the directory (not npy, synthetic)
  split_files train{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};
  split_files test{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  std::string label = "fine"; ///< cifar100: "fine" (100 classes) or "coarse" (20)
  /// [C, H, W]: synthetic's samples, image-folder's after resizing; empty
  /// for the other kinds (their files say it).
  std::vector<int64_t> shape;
  /// Classes; 0: the kind's (10, cifar100 100 or 20, image-folder its
  /// class folders, npy 1 + the largest training label).
  int64_t classes = 0;
  /// Per-channel normalisation, (x / 255 - mean) / std for uint8 data and
  /// (x - mean) / std for float32; empty: computed from the training split
  /// (fashion-mnist: its published 0.2860, 0.3530).
  std::vector<double> mean, std;
  int64_t train_limit = 0;       ///< first N training samples; 0: all
  int64_t test_limit = 0;        ///< first N test samples; 0: all
  int64_t synthetic_train = 4096; ///< synthetic training samples
  int64_t synthetic_test = 1024;  ///< synthetic test samples
  /// The largest dataset held in memory, in MiB of float32 samples (both
  /// splits); 0: half of the machine's physical memory.
  double memory_mb = 0;
  uint64_t seed = 42; ///< synthetic: the training split's seed (test: seed + 1); the
                      ///< validation split's and the augmentation's seed
  /// The fraction of the training split held out for validation (a seeded
  /// choice, model::validation_split); 0: none. In (0, 1) otherwise.
  double validation = 0;
  augment_spec augment;

  bool synthetic() const { return kind == "synthetic"; }
  /// The training samples as far as they are known without reading a file:
  /// a synthetic set's count, else at most train_limit (0: unknown).
  int64_t train_samples_bound() const { return synthetic() ? synthetic_train : train_limit; }
  /// The `data:` key that sets train_samples_bound.
  const char* train_samples_key() const { return synthetic() ? "synthetic_train" : "train_limit"; }
};

/// What a dataset's headers declare (a few bytes of each file; an image
/// folder's listing and first image's header), read before a job starts
/// (model::read_data_header, model/core/dataset.hpp).
struct data_header {
  std::vector<int64_t> shape; ///< [C, H, W] of one sample
  int64_t classes = 0;
  int64_t train = 0; ///< training samples, after data.train_limit, less validation
  int64_t validation = 0; ///< training samples held out for validation
  int64_t test = 0;  ///< test samples, after data.test_limit
};

/// Which epoch's weights a run keeps and when it stops without progress
/// (the workload's `save` and `early_stopping` keys): both judge an epoch by
/// its validation accuracy (model/core/epoch_selection.hpp).
struct selection_spec {
  /// `save: best`: --save-model writes the weights of the epoch with the
  /// highest validation accuracy (the earliest of equals); false (`last`):
  /// the final weights.
  bool keep_best = false;
  /// `early_stopping.patience`: stop after this many epochs in a row
  /// without a higher validation accuracy; 0: never.
  int32_t patience = 0;
};

/// Optimiser settings: the workload's `optimizer:` section (docs/configuration.md),
/// torch.optim's names and defaults except lr and momentum. The step and the
/// schedule are model/core/optimizer.hpp's.
struct optimizer_spec {
  double lr = 0.05;
  double momentum = 0.9;      ///< sgd only
  double weight_decay = 0.0;  ///< sgd, adam: L2 added to the gradient; adamw: decoupled
  std::string name = "sgd";   ///< "sgd", "adam" or "adamw"
  bool nesterov = false;      ///< sgd only (needs momentum > 0)
  double beta1 = 0.9;         ///< adam, adamw: betas[0]
  double beta2 = 0.999;       ///< adam, adamw: betas[1]
  double eps = 1e-8;          ///< adam, adamw
  /// "constant", "step" (x gamma every step_epochs epochs) or "cosine" (to
  /// min_lr at the run's last step), after a linear warm-up of warmup_epochs.
  std::string schedule = "constant";
  double warmup_epochs = 0;   ///< fractions allowed
  double step_epochs = 1;     ///< step: epochs between two decays
  double gamma = 0.1;         ///< step: the decay factor
  double min_lr = 0;          ///< cosine: the lr at the end
  /// The largest L2 norm of the gradients of one step over the parameters
  /// it covers (torch.nn.utils.clip_grad_norm_); 0: no clipping.
  double clip_grad_norm = 0;

  /// Not constant, or with a warm-up: each step's lr (model::lr_at) then
  /// needs the run's length.
  bool scheduled() const { return schedule != "constant" || warmup_epochs > 0; }
};

/// A task: a label map over the dataset's classes.
struct task {
  std::string name;
  std::vector<int64_t> label_map; ///< label_map[dataset class] = task class
  int64_t classes = 0;            ///< 1 + max(label_map)
};

/// Builds a task, validating the map (non-empty, values from 0 to its
/// length - 1: a task has at most as many classes as the dataset). Throws
/// model::error otherwise.
task make_task(std::string name, std::vector<int64_t> label_map);

/// How the training data is cut: the same plan drives the actor source.
struct batch_plan {
  int64_t batch_size = 64;  ///< samples per minibatch (one optimiser step)
  int32_t microbatches = 1; ///< microbatches per minibatch
  int32_t epochs = 1;
  uint64_t seed = 42;       ///< data order seed
};

/// A trainable head on a backbone's features.
struct head_spec {
  std::string name;
  task task_def;
  model_spec model;  ///< name "head", classes = task classes, seed derived
  optimizer_spec optimizer;
};

/// A data-parallel worker's canonical block rows of its frozen prefix
/// (data_parallel_settings::feature_block). Measured here, minibatch 32, one
/// thread: the convnet prefixes (up to pool1, pool3, relu6) cost about what
/// one batch costs with 4 (and with 1), mlp's fc1 4x (13x with 1); 16 and
/// more cost 2-3x on the convnet (the rows crowd into more blocks).
inline constexpr int64_t default_feature_block = 4;

/// How a frozen backbone's features are computed and kept (the transfer
/// job's `backbone.cache`, `backbone.cache_mb`, `backbone.feature_block`).
struct feature_cache_spec {
  bool cache = false;     ///< keep rows in memory (`cache: memory`)
  double cache_mb = 256;  ///< the cache's budget in MiB of tensor data
  /// Canonical block rows K (frozen_features' block_rows); 0: a microbatch
  /// in one forward, as without any cache (only valid with cache false).
  int64_t block_rows = 0;
};

/// Progress callback of a one-process run: (head name, epoch, samples so
/// far, recent mean loss).
using progress_fn = std::function<void(const std::string&, int32_t, int64_t, double)>;

} // namespace baton::model
