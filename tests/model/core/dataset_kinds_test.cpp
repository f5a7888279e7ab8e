// Every data kind read from files this test writes in the kind's real format
// (IDX raw and gzip, CIFAR-10/100 binary, numpy .npy, PNG and JPEG folders),
// normalisation, the memory budget and the errors that name file and index.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/model_errors.hpp"
#include "tests/support/scratch_dir.hpp"

namespace fs = std::filesystem;
using namespace baton::model;
using baton::model::testing::expect_error_naming;
using namespace baton::testing;

namespace {

std::vector<int64_t> labels_of(const dataset& d) {
  return {d.labels.data_ptr<int64_t>(), d.labels.data_ptr<int64_t>() + d.size()};
}

/// The samples of `s` as float32 [N, C, H, W] scaled to [0, 1].
at::Tensor scaled(const sample_set& s) {
  return torch::tensor(std::vector<int64_t>(s.pixels.begin(), s.pixels.end()))
    .view(s.shape)
    .to(torch::kFloat32)
    .div(255.0);
}

/// No normalisation: (x / 255 - 0) / 1, so samples compare with scaled().
void identity_normalisation(data_spec& spec, int64_t channels) {
  spec.mean.assign(static_cast<size_t>(channels), 0.0);
  spec.std.assign(static_cast<size_t>(channels), 1.0);
}

class dataset_kinds : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  scratch_dir scratch_{"dataset-kinds"};
  const std::string dir_ = scratch_.path();
};

} // namespace

// -- idx ----------------------------------------------------------------------------

namespace {

/// An idx pair of `s` under `images`/`labels` in `dir`, gzip or raw.
void write_idx(const std::string& dir, const std::string& images, const std::string& labels,
               const sample_set& s, bool gz, bool channels) {
  std::vector<uint32_t> dims;
  for (size_t i = 0; i < s.shape.size(); ++i)
    if (i != 1 || channels)
      dims.push_back(static_cast<uint32_t>(s.shape[i]));
  const bytes label_bytes(s.labels.begin(), s.labels.end());
  const auto write = gz ? write_gz : write_bytes;
  write(dir + "/" + images, idx_bytes(dims, s.pixels));
  write(dir + "/" + labels, idx_bytes({static_cast<uint32_t>(s.size())}, label_bytes));
}

data_spec idx_spec(const std::string& dir) {
  data_spec spec;
  spec.kind = "idx";
  spec.path = dir;
  spec.train = {"tr-x.idx", "tr-y.idx"};
  spec.test = {"te-x.gz", "te-y.gz"};
  return spec;
}

} // namespace

TEST_F(dataset_kinds, idx_raw_and_gzip_files_with_their_own_names) {
  const auto train = make_samples(12, 1, 5, 7, 4, 1), test = make_samples(6, 1, 5, 7, 4, 2);
  write_idx(dir_, "tr-x.idx", "tr-y.idx", train, false, false);
  write_idx(dir_, "te-x.gz", "te-y.gz", test, true, false);
  data_spec spec = idx_spec(dir_);
  identity_normalisation(spec, 1);
  const auto h = read_data_header(spec);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_EQ(h.train, 12);
  EXPECT_EQ(h.test, 6);
  EXPECT_EQ(h.classes, 10); // idx: MNIST's ten unless data.classes says
  auto [tr, te] = load_splits(spec);
  EXPECT_EQ(tr.name, "idx");
  EXPECT_TRUE(torch::allclose(tr.images, scaled(train).view({12, 1, 5, 7})));
  EXPECT_TRUE(torch::allclose(te.images, scaled(test).view({6, 1, 5, 7})));
  EXPECT_EQ(labels_of(tr), train.labels);
  EXPECT_EQ(labels_of(te), test.labels);
}

TEST_F(dataset_kinds, idx_with_channels_and_a_limit) {
  const auto train = make_samples(9, 3, 4, 6, 3, 3), test = make_samples(3, 3, 4, 6, 3, 4);
  write_idx(dir_, "tr-x.idx", "tr-y.idx", train, true, true);
  write_idx(dir_, "te-x.gz", "te-y.gz", test, true, true);
  data_spec spec = idx_spec(dir_);
  spec.classes = 3;
  spec.train_limit = 5;
  identity_normalisation(spec, 3);
  EXPECT_EQ(data_shape(spec), (std::vector<int64_t>{3, 4, 6}));
  auto data = load_data(spec, split::train);
  ASSERT_EQ(data.size(), 5);
  EXPECT_EQ(data.classes, 3);
  EXPECT_TRUE(torch::allclose(data.images, scaled(train).slice(0, 0, 5)));
}

TEST_F(dataset_kinds, idx_label_out_of_range_names_file_and_index) {
  auto train = make_samples(8, 1, 4, 4, 4, 5);
  train.labels[5] = 12;
  write_idx(dir_, "tr-x.idx", "tr-y.idx", train, false, false);
  write_idx(dir_, "te-x.gz", "te-y.gz", make_samples(2, 1, 4, 4, 4, 6), true, false);
  expect_error_naming([&] { load_splits(idx_spec(dir_)); },
                      path("tr-y.idx") + ": label 12 at index 5 out of range, expected 0..9");
}

TEST_F(dataset_kinds, a_declared_shape_must_be_the_files) {
  write_idx(dir_, "tr-x.idx", "tr-y.idx", make_samples(4, 1, 4, 4, 4, 5), false, false);
  write_idx(dir_, "te-x.gz", "te-y.gz", make_samples(2, 1, 4, 4, 4, 6), true, false);
  data_spec spec = idx_spec(dir_);
  spec.shape = {1, 4, 4};
  EXPECT_EQ(read_data_header(spec).shape, spec.shape);
  spec.shape = {1, 28, 28};
  expect_error_naming([&] { read_data_header(spec); },
                      "the train split's samples are 1x4x4, data.shape says 1x28x28");
  expect_error_naming([&] { load_data(spec, split::test); },
                      "the test split's samples are 1x4x4, data.shape says 1x28x28");
}

TEST_F(dataset_kinds, idx_splits_of_different_shapes_are_refused) {
  write_idx(dir_, "tr-x.idx", "tr-y.idx", make_samples(4, 1, 4, 4, 4, 5), false, false);
  write_idx(dir_, "te-x.gz", "te-y.gz", make_samples(2, 1, 5, 4, 4, 6), true, false);
  expect_error_naming([&] { read_data_header(idx_spec(dir_)); },
                      "the test split's samples are 1x5x4, the training split's 1x4x4");
}

// -- cifar10, cifar100 --------------------------------------------------------------

TEST_F(dataset_kinds, cifar10_folder_of_batches) {
  const auto train = make_samples(23, 3, 32, 32, 10, 7), test = make_samples(7, 3, 32, 32, 10, 8);
  write_cifar10(dir_, train, test);
  data_spec spec;
  spec.kind = "cifar10";
  spec.path = dir_;
  identity_normalisation(spec, 3);
  auto [tr, te] = load_splits(spec);
  EXPECT_EQ(tr.classes, 10);
  EXPECT_EQ(labels_of(tr), train.labels); // batches 1..5 in order
  EXPECT_TRUE(torch::allclose(tr.images, scaled(train)));
  EXPECT_TRUE(torch::allclose(te.images, scaled(test)));
}

namespace {

/// A CIFAR-100 record per sample: coarse label, fine label, pixels.
bytes cifar100_records(const sample_set& s, const std::vector<int64_t>& coarse) {
  bytes out;
  for (int64_t i = 0; i < s.size(); ++i) {
    out.push_back(static_cast<unsigned char>(coarse[static_cast<size_t>(i)]));
    out.push_back(static_cast<unsigned char>(s.labels[static_cast<size_t>(i)]));
    out.insert(out.end(), s.pixels.begin() + i * s.sample_bytes(),
               s.pixels.begin() + (i + 1) * s.sample_bytes());
  }
  return out;
}

std::vector<int64_t> coarse_of(const sample_set& s) {
  std::vector<int64_t> out;
  for (auto fine : s.labels)
    out.push_back(fine / 5);
  return out;
}

} // namespace

TEST_F(dataset_kinds, cifar100_fine_and_coarse_labels) {
  const auto train = make_samples(100, 3, 32, 32, 100, 9);
  const auto test = make_samples(10, 3, 32, 32, 100, 10);
  write_bytes(path("train.bin"), cifar100_records(train, coarse_of(train)));
  write_bytes(path("test.bin"), cifar100_records(test, coarse_of(test)));
  data_spec spec;
  spec.kind = "cifar100";
  spec.path = dir_;
  auto fine = load_data(spec, split::train);
  EXPECT_EQ(fine.classes, 100);
  EXPECT_EQ(labels_of(fine), train.labels);
  spec.label = "coarse";
  auto coarse = load_data(spec, split::test);
  EXPECT_EQ(coarse.classes, 20);
  EXPECT_EQ(labels_of(coarse), coarse_of(test));
  auto bad = coarse_of(test);
  bad[3] = 20;
  write_bytes(path("test.bin"), cifar100_records(test, bad));
  expect_error_naming([&] { load_data(spec, split::test); },
                      path("test.bin") + ": record 3 has label 20, expected 0..19");
}

// -- npy ----------------------------------------------------------------------------

namespace {

data_spec npy_spec(const std::string& dir) {
  data_spec spec;
  spec.kind = "npy";
  spec.train = {dir + "/x_train.npy", dir + "/y_train.npy"};
  spec.test = {dir + "/x_test.npy", dir + "/y_test.npy"};
  return spec;
}

template <typename T>
bytes npy_of(const std::string& descr, const std::vector<int64_t>& shape,
             const std::vector<T>& values) {
  return npy_bytes(descr, shape, values.data(), values.size() * sizeof(T));
}

} // namespace

TEST_F(dataset_kinds, npy_uint8_samples_and_int64_labels) {
  const auto train = make_samples(10, 1, 3, 5, 4, 11), test = make_samples(4, 1, 3, 5, 4, 12);
  // x [N, H, W]: one channel.
  write_bytes(path("x_train.npy"), npy_bytes("|u1", {10, 3, 5}, train.pixels.data(), 150));
  write_bytes(path("y_train.npy"), npy_of("<i8", {10}, train.labels));
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), test);
  data_spec spec = npy_spec(dir_);
  identity_normalisation(spec, 1);
  const auto h = read_data_header(spec);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(h.classes, 4); // 1 + the largest training label
  auto [tr, te] = load_splits(spec);
  EXPECT_EQ(tr.name, "npy");
  EXPECT_TRUE(torch::allclose(tr.images, scaled(train)));
  EXPECT_EQ(labels_of(tr), train.labels);
  EXPECT_EQ(labels_of(te), test.labels);
}

TEST_F(dataset_kinds, npy_float32_samples_and_int32_or_uint8_labels) {
  std::vector<float> x(6 * 2 * 2 * 3);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f * static_cast<float>(i % 9) - 1.0f;
  write_bytes(path("x_train.npy"), npy_of("<f4", {6, 2, 2, 3}, x));
  write_bytes(path("y_train.npy"), npy_of<int32_t>("<i4", {6}, {0, 1, 2, 0, 1, 2}));
  write_bytes(path("x_test.npy"), npy_of("<f4", {6, 2, 2, 3}, x));
  write_bytes(path("y_test.npy"), npy_of<uint8_t>("|u1", {6}, {2, 2, 1, 1, 0, 0}));
  data_spec spec = npy_spec(dir_);
  spec.mean = {0.0};
  spec.std = {2.0}; // float32 samples are not scaled by 255: (x - 0) / 2
  auto [tr, te] = load_splits(spec);
  EXPECT_EQ(tr.classes, 3);
  EXPECT_TRUE(torch::allclose(tr.images, torch::tensor(x).view({6, 2, 2, 3}) / 2));
  EXPECT_EQ(labels_of(tr), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(labels_of(te), (std::vector<int64_t>{2, 2, 1, 1, 0, 0}));
}

TEST_F(dataset_kinds, npy_header_spellings_numpy_writes) {
  // numpy 1.x writes "'shape': (4, 1, 2, 2), }", older ones no trailing
  // comma; keys in any order, single or double spaces.
  const bytes x(16, 100);
  const std::vector<int64_t> y{0, 1, 0, 1};
  write_bytes(path("x_train.npy"),
              npy_bytes_with_header(
                "{'shape': (4, 1, 2, 2), 'fortran_order': False, 'descr': '|u1'}", x.data(),
                x.size()));
  write_bytes(path("y_train.npy"),
              npy_bytes_with_header("{'descr':'<i8','fortran_order':False,'shape':(4,)}",
                                    y.data(), 32));
  write_bytes(path("x_test.npy"), npy_bytes("|u1", {4, 1, 2, 2}, x.data(), x.size()));
  write_bytes(path("y_test.npy"), npy_of("<i8", {4}, y));
  EXPECT_EQ(read_data_header(npy_spec(dir_)).shape, (std::vector<int64_t>{1, 2, 2}));
}

TEST_F(dataset_kinds, npy_bad_files_are_refused_naming_them) {
  const auto s = make_samples(4, 1, 2, 2, 2, 13);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), s);
  write_bytes(path("y_train.npy"), npy_of("<i8", {4}, s.labels));
  const data_spec spec = npy_spec(dir_);
  const std::string x = path("x_train.npy"), y = path("y_train.npy");
  auto refused = [&](const bytes& x_file, const std::string& needle) {
    write_bytes(x, x_file);
    expect_error_naming([&] { read_data_header(spec); }, needle);
  };
  const std::vector<double> f64(16, 0.5);
  refused(npy_of("<f8", {4, 1, 2, 2}, f64), x + ": x has dtype '<f8', expected uint8");
  refused(npy_bytes("|u1", {4, 4}, s.pixels.data(), 16), x + ": x has 2 dimensions");
  refused(npy_bytes("|u1", {5, 1, 2, 2}, s.pixels.data(), 16), x + ": truncated");
  refused({'P', 'K', 3, 4}, x + ": not a numpy .npy file");
  refused(npy_bytes_with_header("{'descr': '|u1', 'fortran_order': True, 'shape': (4, 1, 2, 2), }",
                                s.pixels.data(), 16),
          x + ": the array is in Fortran order");
  refused(npy_bytes_with_header("{'descr': '|u1', 'fortran_order': False}", s.pixels.data(), 16),
          x + ": the .npy header has no readable 'shape'");
  write_npy_pair(x, path("unused.npy"), s);
  write_bytes(y, npy_of("<f4", {4}, std::vector<float>(4, 1.0f)));
  expect_error_naming([&] { read_data_header(spec); }, y + ": y has dtype '<f4'");
  write_bytes(y, npy_of("<i8", {3}, std::vector<int64_t>{0, 1, 0}));
  expect_error_naming([&] { read_data_header(spec); },
                      y + ": y has 1 dimensions and 3 rows, expected [4]");
  write_bytes(y, npy_of(">i8", {4}, s.labels));
  expect_error_naming([&] { read_data_header(spec); }, y + ": y has dtype '>i8'");
}

TEST_F(dataset_kinds, npy_negative_or_out_of_range_label_names_file_and_index) {
  const auto s = make_samples(6, 1, 2, 2, 3, 14);
  write_npy_pair(path("x_train.npy"), path("y_train.npy"), s);
  write_bytes(path("x_test.npy"), npy_bytes("|u1", {6, 1, 2, 2}, s.pixels.data(), 24));
  write_bytes(path("y_test.npy"), npy_of<int64_t>("<i8", {6}, {0, 1, 2, 0, 7, 1}));
  expect_error_naming([&] { load_splits(npy_spec(dir_)); },
                      path("y_test.npy") + ": label 7 at index 4 out of range, expected 0..2");
  write_bytes(path("y_train.npy"), npy_of<int32_t>("<i4", {6}, {0, 1, -1, 0, 1, 2}));
  expect_error_naming([&] { load_splits(npy_spec(dir_)); },
                      path("y_train.npy") + ": label -1 at index 2");
}

// -- image-folder -------------------------------------------------------------------

namespace {

/// Classes bee, ant, cat (listed out of order: baton sorts them), each with
/// a colour; train has 2 images a class, test 1; sizes vary (12x10, 9x9).
void write_three_classes(const std::string& dir) {
  const std::vector<std::pair<std::string, std::vector<unsigned char>>> classes = {
    {"bee", {200, 200, 0}}, {"ant", {255, 0, 0}}, {"cat", {0, 0, 255}}};
  for (const auto& [name, rgb] : classes) {
    fs::create_directories(dir + "/train/" + name);
    fs::create_directories(dir + "/test/" + name);
    write_image(dir + "/train/" + name + "/a.png", 12, 10, rgb);
    write_image(dir + "/train/" + name + "/b.JPG", 9, 9, rgb);
    write_image(dir + "/test/" + name + "/c.jpeg", 12, 10, rgb);
  }
  std::ofstream(dir + "/train/ant/notes.txt") << "not an image: skipped";
}

} // namespace

TEST_F(dataset_kinds, image_folder_png_and_jpeg_resized_to_the_shape) {
  write_three_classes(dir_);
  data_spec spec;
  spec.kind = "image-folder";
  spec.path = dir_;
  spec.shape = {3, 8, 8};
  identity_normalisation(spec, 3);
  const auto h = read_data_header(spec);
  EXPECT_EQ(h.classes, 3);
  EXPECT_EQ(h.train, 6);
  EXPECT_EQ(h.test, 3);
  auto [tr, te] = load_splits(spec);
  EXPECT_EQ(tr.images.sizes(), (std::vector<int64_t>{6, 3, 8, 8}));
  // Classes sorted (ant 0, bee 1, cat 2), taken in turn: a limit keeps each.
  EXPECT_EQ(labels_of(tr), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(labels_of(te), (std::vector<int64_t>{0, 1, 2}));
  // ant is red: channel 0 near 1, channel 2 near 0 (JPEG is lossy).
  EXPECT_NEAR(tr.images[0][0].mean().item<double>(), 1.0, 0.02);
  EXPECT_NEAR(tr.images[3][2].mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(te.images[2][2].mean().item<double>(), 1.0, 0.05); // cat is blue
  // One channel: stb_image converts colour to grey.
  spec.shape = {1, 5, 5};
  spec.mean = {0.0};
  spec.std = {1.0};
  EXPECT_EQ(load_data(spec, split::test).images.sizes(), (std::vector<int64_t>{3, 1, 5, 5}));
}

TEST_F(dataset_kinds, image_folder_errors_name_the_file_or_folder) {
  write_three_classes(dir_);
  data_spec spec;
  spec.kind = "image-folder";
  spec.path = dir_;
  // Without data.shape the images must be of one size.
  expect_error_naming([&] { load_data(spec, split::train); },
                      dir_ + "/train/ant/b.JPG: is 9x9, expected 12x10");
  spec.shape = {3, 8, 8};
  fs::remove_all(dir_ + "/test/bee");
  expect_error_naming([&] { load_data(spec, split::test); },
                      dir_ + "/test/bee: missing class folder");
  fs::create_directories(dir_ + "/test/bee");
  std::ofstream(dir_ + "/test/bee/broken.png") << "not a png";
  expect_error_naming([&] { load_data(spec, split::test); },
                      dir_ + "/test/bee/broken.png: cannot decode");
}

// -- normalisation, order, memory ---------------------------------------------------

TEST_F(dataset_kinds, normalisation_given_per_channel_and_computed_from_training) {
  const auto train = make_samples(30, 3, 4, 4, 3, 15), test = make_samples(9, 3, 4, 4, 3, 16);
  write_npy_pair(path("x_train.npy"), path("y_train.npy"), train);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), test);
  data_spec spec = npy_spec(dir_);
  spec.mean = {0.1, 0.2, 0.3};
  spec.std = {0.5, 0.25, 2.0};
  auto given = load_data(spec, split::test);
  auto mean = torch::tensor({0.1, 0.2, 0.3}).to(torch::kFloat32).view({1, 3, 1, 1});
  auto stddev = torch::tensor({0.5, 0.25, 2.0}).to(torch::kFloat32).view({1, 3, 1, 1});
  EXPECT_TRUE(torch::allclose(given.images, (scaled(test) - mean) / stddev, 1e-5, 1e-5));
  // Computed: every training channel has mean 0 and std 1, and the test
  // split is normalised with the training split's statistics, not its own.
  spec.mean.clear();
  spec.std.clear();
  auto [tr, te] = load_splits(spec);
  auto per_channel = tr.images.transpose(0, 1).reshape({3, -1});
  EXPECT_TRUE(torch::allclose(per_channel.mean(1), torch::zeros({3}), 0, 1e-4));
  EXPECT_TRUE(torch::allclose(per_channel.std(1, false), torch::ones({3}), 0, 1e-4));
  auto train_x = scaled(train).transpose(0, 1).reshape({3, -1}).to(torch::kFloat64);
  auto expected = (scaled(test).to(torch::kFloat64) - train_x.mean(1).view({1, 3, 1, 1})) /
                  train_x.std(1, false).view({1, 3, 1, 1});
  EXPECT_TRUE(torch::allclose(te.images.to(torch::kFloat64), expected, 1e-4, 1e-4));
  EXPECT_TRUE(torch::equal(load_data(spec, split::test).images, te.images));
}

TEST_F(dataset_kinds, seeded_order_moves_samples_with_their_labels) {
  const auto s = make_samples(40, 1, 3, 3, 4, 17);
  write_npy_pair(path("x_train.npy"), path("y_train.npy"), s);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), s);
  data_spec spec = npy_spec(dir_);
  auto data = load_data(spec, split::train);
  EXPECT_EQ(labels_of(data), s.labels); // loading keeps the files' order
  const auto order = epoch_order(data.size(), 42, 1);
  EXPECT_EQ(order, epoch_order(load_data(spec, split::train).size(), 42, 1));
  auto [images, labels] = gather(data, order);
  for (size_t i = 0; i < order.size(); ++i) {
    const auto id = order[i];
    EXPECT_EQ(labels[static_cast<int64_t>(i)].item<int64_t>(), s.labels[static_cast<size_t>(id)]);
    EXPECT_TRUE(torch::equal(images[static_cast<int64_t>(i)], data.images[id]));
  }
}

TEST_F(dataset_kinds, over_the_memory_budget_is_refused_naming_it) {
  // 300 + 100 samples of 3x32x32 float32: 4.7 MiB.
  write_cifar10(dir_, make_samples(300, 3, 32, 32, 10, 18), make_samples(100, 3, 32, 32, 10, 19));
  data_spec spec;
  spec.kind = "cifar10";
  spec.path = dir_;
  spec.memory_mb = 2;
  const std::string budget = "more than its budget data.memory_mb = 2 MiB";
  expect_error_naming([&] { read_data_header(spec); }, budget);
  expect_error_naming([&] { load_splits(spec); }, budget);
  expect_error_naming([&] { load_data(spec, split::train); }, "the dataset needs 3.5 MiB");
  spec.memory_mb = 0.5;
  expect_error_naming([&] { load_data(spec, split::test); }, "data.memory_mb = 0.5 MiB");
  spec.memory_mb = 8;
  EXPECT_EQ(load_splits(spec).first.size(), 300);
  spec.memory_mb = 2;
  spec.train_limit = 50; // what the error says to lower: 150 samples, 1.8 MiB
  EXPECT_EQ(load_splits(spec).first.size(), 50);
}
