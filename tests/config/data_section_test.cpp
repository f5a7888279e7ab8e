// The topology's `data:` section (docs/data.md): every kind read into a
// data_spec with the shape and classes of its files, and each mistake
// refused with the file, the line and what was expected.

#include <gtest/gtest.h>

#include "actors/modes/job_schemas.hpp"
#include "messages/errc.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/topology_fixture.hpp"

using baton::describe;
using namespace baton::testing;

namespace {

// Lines 1-7; the data section follows from line 8 on.
const std::string head = std::string{"job: transfer\nseed: 7\n"} + small_transfer_end;

class data_section : public ::testing::Test {
protected:
  void SetUp() override {
    // Ten classes (the task maps ten), 3x8x8.
    write_npy_pair(path("x.npy"), path("y.npy"), make_samples(40, 3, 8, 8, 10, 1));
  }

  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

  /// The refusal of `data`, which must name FILE:`line` and `needle`.
  void expect_refused(const std::string& data, int line, const std::string& needle) const {
    const std::string why = topology_.refusal(data);
    EXPECT_NE(why.find(file_ + ":" + std::to_string(line) + ":"), std::string::npos)
      << why << "\nexpected line " << line;
    EXPECT_NE(why.find(needle), std::string::npos) << why << "\nexpected: " << needle;
  }

  /// A data section of kind npy with x.npy and y.npy for both splits.
  std::string npy_data(const std::string& more = "") const {
    return "data:\n"
           "  kind: npy\n"
           "  train: {x: " + path("x.npy") + ", y: " + path("y.npy") + "}\n"
           "  test: {x: " + path("x.npy") + ", y: " + path("y.npy") + "}\n" + more;
  }

  scratch_dir dir_{"data-section"};
  const std::string file_ = dir_.path() + "/data.yaml";
  const topology_fixture topology_{file_, head};
};

} // namespace

TEST_F(data_section, npy_pair_gives_the_shape_and_classes_of_its_files) {
  auto t = topology_.parse(npy_data("  normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}\n"
                                    "  memory_mb: 64\n"));
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->data.kind, "npy");
  EXPECT_EQ(t->data.train.x, path("x.npy"));
  EXPECT_EQ(t->data.test.y, path("y.npy"));
  EXPECT_EQ(t->sample_shape, (std::vector<int64_t>{3, 8, 8}));
  EXPECT_EQ(t->backbone.in_channels, 3); // the model is built for the data
  EXPECT_EQ(t->backbone.in_height, 8);
  EXPECT_EQ(t->data.mean, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(t->data.memory_mb, 64);
}

TEST_F(data_section, npy_paths_are_relative_to_the_topology_file) {
  auto t = baton::actors::parse_topology_as(
    topology_.text("data: {kind: npy, train: {x: x.npy, y: y.npy}, test: {x: x.npy, y: y.npy}}\n"),
    file_, {});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->data.train.x, path("x.npy"));
}

TEST_F(data_section, npy_without_a_split_names_it) {
  expect_refused("data:\n  kind: npy\n  test: {x: " + path("x.npy") + ", y: " + path("y.npy") +
                   "}\n",
                 8, "data.kind is npy but 'data.train' is not given (expected {x: X.npy, "
                    "y: Y.npy})");
  expect_refused("data:\n  kind: npy\n  train: {x: " + path("x.npy") + "}\n  test: {x: a, y: b}\n",
                 10, "y");
}

TEST_F(data_section, dir_with_npy_is_refused) {
  expect_refused(npy_data("  dir: " + dir_.path() + "\n"), 12,
                 "'data.dir' is not read with data.kind npy (give data.train and data.test");
}

TEST_F(data_section, images_and_labels_are_idx_names_not_npy) {
  expect_refused("data:\n  kind: npy\n  train: {images: a.npy, labels: b.npy}\n", 10,
                 "'data.train.images' is not read with data.kind npy (expected x and y)");
}

TEST_F(data_section, label_applies_to_cifar100_only) {
  expect_refused(npy_data("  label: coarse\n"), 12,
                 "'data.label' applies to data.kind cifar100 only (the kind is 'npy')");
  expect_refused("data:\n  kind: cifar100\n  dir: " + dir_.path() + "\n  label: medium\n", 11,
                 "fine, coarse");
}

TEST_F(data_section, kind_and_dataset_together_are_refused) {
  expect_refused("data:\n  dataset: synthetic\n  kind: synthetic\n", 10,
                 "give data.kind or data.dataset, not both");
}

TEST_F(data_section, unknown_kind_says_what_it_may_have_meant) {
  expect_refused("data:\n  kind: cifar\n  dir: " + dir_.path() + "\n", 9,
                 "did you mean 'cifar10'?");
  expect_refused("data:\n  kind: imagefolder\n", 9, "did you mean 'image-folder'?");
}

TEST_F(data_section, file_kinds_need_their_dir) {
  expect_refused("data:\n  kind: cifar10\n", 9, "data.kind is cifar10 but 'data.dir' is not given");
}

TEST_F(data_section, a_missing_or_bad_file_is_named_at_the_data_section) {
  expect_refused("data:\n  kind: cifar10\n  dir: " + path("nowhere") + "\n", 10,
                 path("nowhere") + "/data_batch_1.bin: cannot open");
  write_bytes(path("bad.npy"), {'n', 'o'});
  // A file kind without a directory: the error names the file, not a dir.
  expect_refused("data:\n  kind: npy\n  train: {x: " + path("bad.npy") + ", y: " + path("y.npy") +
                   "}\n  test: {x: " + path("x.npy") + ", y: " + path("y.npy") + "}\n",
                 9, "cannot read the dataset npy: " + path("bad.npy") + ": not a numpy .npy file");
}

TEST_F(data_section, over_the_memory_budget_says_the_budget) {
  // 80 samples of 3x8x8 float32: 0.06 MiB.
  expect_refused(npy_data("  memory_mb: 0.01\n"), 9,
                 "more than its budget data.memory_mb = 0.01 MiB");
}

TEST_F(data_section, normalize_needs_one_mean_and_std_per_channel) {
  expect_refused(npy_data("  normalize: {mean: [0.5, 0.5], std: [0.2]}\n"), 12,
                 "has 1 values, mean has 2");
  expect_refused(npy_data("  normalize: {mean: [0.5], std: [0]}\n"), 12, "a positive number");
  expect_refused(npy_data("  normalize: {mean: [0.5, 0.5], std: [0.2, 0.2]}\n"), 12,
                 "data.normalize has 2 values in mean and std, the samples have 3 channels");
}

TEST_F(data_section, shape_of_an_image_folder) {
  expect_refused("data:\n  kind: image-folder\n  dir: " + dir_.path() + "\n  shape: [3, 0, 8]\n",
                 11, "a positive integer");
}

TEST_F(data_section, listed_nodes_need_what_the_files_would_say) {
  // The source's node reads the files; the models are built from the section.
  const std::string nodes = "nodes: [{name: n1, host: 127.0.0.1, port: 1}]\n";
  const topology_fixture listed{file_, nodes + head};
  auto refused = [&](const std::string& data, const std::string& needle) {
    const std::string why = listed.refusal(data);
    EXPECT_NE(why.find(file_ + ":9:"), std::string::npos) << why;
    EXPECT_NE(why.find(needle), std::string::npos) << why << "\nexpected: " << needle;
  };
  refused(npy_data(), "give data.shape [C, H, W] and data.classes (docs/data.md)");
  refused(npy_data("  shape: [3, 8, 8]\n"), "give data.classes (docs/data.md)");
  refused("data:\n  kind: idx\n  dir: " + dir_.path() + "\n", "give data.shape [C, H, W] (");
  auto t = listed.parse(npy_data("  shape: [3, 8, 8]\n  classes: 10\n"));
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->sample_shape, (std::vector<int64_t>{3, 8, 8}));
  EXPECT_TRUE(listed.parse("data:\n  kind: cifar10\n  dir: /nowhere\n")); // 3x32x32, 10
  refused(npy_data(), "(they are read on the source's node, data.node)");
  // A job whose workers read their shards says so (its schema's reads_data_on).
  const topology_fixture sharded{
    file_, nodes + small_job_topology("data-parallel", "data_parallel", "{checkpoint: none}",
                                      "{kind: npy, train: {x: " + path("x.npy") + ", y: " +
                                        path("y.npy") + "}, test: {x: " + path("x.npy") +
                                        ", y: " + path("y.npy") + "}}") +
                      "  workers: 2\n"};
  const std::string why = sharded.refusal("");
  EXPECT_NE(why.find("(each worker reads its shard of them on its own node)"),
            std::string::npos) << why;
}

// data.validation, data.augment, save and early_stopping (issue 35): read
// into the workload, and each mistake refused at its line.
TEST_F(data_section, validation_augment_save_and_early_stopping_are_read) {
  auto t = topology_.parse(npy_data("  validation: 0.25\n  augment: {crop: 2, flip: true}\n"
                                    "early_stopping: {patience: 2}\n"));
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_DOUBLE_EQ(t->data.validation, 0.25);
  EXPECT_EQ(t->data.augment.crop, 2);
  EXPECT_TRUE(t->data.augment.flip);
  EXPECT_TRUE(t->selection.keep_best); // save: best is the default with validation
  EXPECT_EQ(t->selection.patience, 2);
  auto last = topology_.parse(npy_data("  validation: 0.25\nsave: last\n"));
  ASSERT_TRUE(last) << describe(last.error());
  EXPECT_FALSE(last->selection.keep_best);
  auto none = topology_.parse(npy_data());
  ASSERT_TRUE(none) << describe(none.error());
  EXPECT_FALSE(none->selection.keep_best);
  EXPECT_EQ(none->data.validation, 0);
}

TEST_F(data_section, validation_and_augment_refuse_bad_values_at_their_line) {
  expect_refused(npy_data("  validation: 1.5\n"), 12, "above 0 and below 1");
  expect_refused(npy_data("  validation: 0\n"), 12, "above 0 and below 1");
  // 40 samples: 0.01 holds out none.
  expect_refused(npy_data("  validation: 0.01\n"), 12,
                 "data.validation 0.010000 of 40 training samples holds out 0");
  expect_refused(npy_data("  augment: {crop: -1}\n"), 12, "a number of pixels from 0");
  expect_refused(npy_data("  augment: {crop: 8}\n"), 12,
                 "expected less than the samples' 8 pixels");
  expect_refused(npy_data("  augment: {flip: yes please}\n"), 12, "flip");
  expect_refused("data:\n  kind: synthetic\n  augment: {flip: true}\n", 10,
                 "synthetic samples are per-pixel patterns");
}

TEST_F(data_section, best_and_early_stopping_need_validation) {
  expect_refused(npy_data("save: best\n"), 12,
                 "save: best keeps the epoch of the highest validation accuracy, but the data "
                 "holds out no validation samples");
  expect_refused(npy_data("save: first\n"), 12, "best, last");
  expect_refused(npy_data("early_stopping: {patience: 2}\n"), 12,
                 "early_stopping judges epochs by their validation accuracy");
  expect_refused(npy_data("  validation: 0.25\nearly_stopping: {patience: 0}\n"), 13,
                 "a number of epochs from 1");
  expect_refused(npy_data("  validation: 0.25\nearly_stopping: {}\n"), 13, "needs patience");
}

// A feature cache keeps a sample's first-epoch features: refused with augmentation.
TEST_F(data_section, augment_refuses_a_cache_of_training_features) {
  const topology_fixture whole{file_, ""};
  const std::string tasks = "tasks:\n  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  const std::string why_transfer = whole.refusal(
    "job: transfer\n" + npy_data("  augment: {flip: true}\n") +
    "backbone: {model: convnet, checkpoint: \"\", split: [], cache: memory, feature_block: 4}\n" +
    tasks + "heads:\n  - {name: all10, task: all10}\n");
  EXPECT_NE(why_transfer.find(file_ + ":7:"), std::string::npos) << why_transfer;
  EXPECT_NE(why_transfer.find("'backbone.cache' is memory, which keeps a training sample's "
                              "features from the epoch that first computed them"),
            std::string::npos)
    << why_transfer;
  const std::string why_dp = whole.refusal(
    "job: data-parallel\n" + npy_data("  augment: {crop: 1}\n") +
    "backbone: {model: convnet, checkpoint: none}\n" + tasks +
    "data_parallel:\n  freeze: {up_to: pool1, cache: memory}\n");
  EXPECT_NE(why_dp.find("'data_parallel.freeze.cache' is memory"), std::string::npos) << why_dp;
}
