#pragma once

// What a topology says about the model, plain data free of LibTorch: the
// config, runtime and roles hold these and pass them on; model/ builds and
// trains from them (layered_model.hpp, training.hpp, task.hpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace baton::model {

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
  /// "mlp", "torchscript",
  /// "ist_mlp" (the network of independent subnet training,
  /// model/ist/ist_network.hpp, as layers: flatten, then per hidden layer k
  /// fc<k> (no bias) bn<k> (batch statistics, affine) relu<k>, then
  /// fc<L+1> (no bias) and `norm` (affine-free batch statistics on the
  /// logits); widths `hidden`, weights those of make_ist_network(seed)).
  std::string name = "convnet";
  int64_t classes = 10;            ///< output classes (classifier, head)
  int64_t features = 256;          ///< input width (classifier, head): backbone_features()
  int64_t in_channels = 1;         ///< input channels of convnet, convnet_wide, mlp and
                                   ///< resnet18 (set it to 3 for torchvision's resnet18)
  int64_t wide_features = 32768;   ///< convnet_wide hidden width
  std::vector<int64_t> hidden{4096}; ///< ist_mlp hidden widths, one per hidden layer
  std::string path;                ///< torchscript file (name == "torchscript")
  uint64_t seed = 0;               ///< initialisation seed
};

/// Optimiser settings (SGD with momentum and weight decay).
struct optimizer_spec {
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
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
