// Every data kind read from files this test writes in the kind's real format
// (IDX raw and gzip, CIFAR-10/100 binary, numpy .npy, PNG and JPEG folders),
// normalisation, the memory budget and the errors that name file and index.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/data_file.hpp"
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
  auto [tr, held_out, te] = load_splits(spec);
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
  auto [tr, held_out, te] = load_splits(spec);
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
  auto [tr, held_out, te] = load_splits(spec);
  EXPECT_EQ(tr.name, "npy");
  EXPECT_TRUE(torch::allclose(tr.images, scaled(train)));
  EXPECT_EQ(labels_of(tr), train.labels);
  EXPECT_EQ(labels_of(te), test.labels);
}

// A limit above what the files hold reads them all: the readers take the
// limit and stop at the files' own count (load.cpp no longer reads their
// header for it first), a split read alone (load_data) and both together.
TEST_F(dataset_kinds, a_limit_above_the_files_reads_every_sample) {
  const auto train = make_samples(9, 1, 4, 6, 3, 5), test = make_samples(3, 1, 4, 6, 3, 6);
  write_idx(dir_, "tr-x.idx", "tr-y.idx", train, true, false);
  write_idx(dir_, "te-x.gz", "te-y.gz", test, true, false);
  data_spec spec = idx_spec(dir_);
  spec.classes = 3;
  spec.train_limit = 100;
  spec.test_limit = 50;
  identity_normalisation(spec, 1);
  const auto h = read_data_header(spec);
  EXPECT_EQ(h.train, 9);
  EXPECT_EQ(h.test, 3);
  auto alone = load_data(spec, split::train);
  ASSERT_EQ(alone.size(), 9);
  EXPECT_TRUE(torch::allclose(alone.images, scaled(train).view({9, 1, 4, 6})));
  auto [tr, held_out, te] = load_splits(spec);
  ASSERT_EQ(tr.size(), 9);
  ASSERT_EQ(te.size(), 3);
  EXPECT_EQ(labels_of(te), test.labels);

  write_npy_pair(path("x_train.npy"), path("y_train.npy"), train);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), test);
  data_spec npy = npy_spec(dir_);
  npy.train_limit = 100;
  npy.test_limit = 50;
  identity_normalisation(npy, 1);
  auto [ntr, nheld_out, nte] = load_splits(npy);
  ASSERT_EQ(ntr.size(), 9);
  ASSERT_EQ(nte.size(), 3);
  EXPECT_TRUE(torch::allclose(ntr.images, scaled(train).view({9, 1, 4, 6})));
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
  auto [tr, held_out, te] = load_splits(spec);
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
  auto [tr, held_out, te] = load_splits(spec);
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
  auto [tr, held_out, te] = load_splits(spec);
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
  EXPECT_EQ(load_splits(spec).train.size(), 300);
  spec.memory_mb = 2;
  spec.train_limit = 50; // what the error says to lower: 150 samples, 1.8 MiB
  EXPECT_EQ(load_splits(spec).train.size(), 50);
}

// -- hostile files (issue 32) -------------------------------------------------------

namespace {

/// The data roots (a node's data_dirs) for one scope.
struct data_roots_scope {
  explicit data_roots_scope(const std::string& root) { set_data_roots({root}); }
  ~data_roots_scope() { set_data_roots({}); }
};

} // namespace

// Item 3: a node's data_dirs (set_data_roots) hold for every file and
// folder a reader opens, resolved: a class folder, an image, a CIFAR batch,
// an npy or an IDX file that is a symlink out of the roots is refused.
TEST_F(dataset_kinds, symlinks_out_of_the_roots_are_refused_for_every_kind) {
  const std::string root = path("root"), outside = path("outside");
  fs::create_directories(root);
  fs::create_directories(outside);
  const std::string needle = "outside the node's data_dirs (" + root + ")";
  // CIFAR-10: one batch of the five is a link to a batch outside.
  fs::create_directories(root + "/cifar");
  write_cifar10(root + "/cifar", make_samples(10, 3, 32, 32, 10, 20),
                make_samples(2, 3, 32, 32, 10, 21));
  fs::rename(root + "/cifar/data_batch_2.bin", outside + "/batch.bin");
  fs::create_symlink(outside + "/batch.bin", root + "/cifar/data_batch_2.bin");
  data_spec cifar;
  cifar.kind = "cifar10";
  cifar.path = root + "/cifar";
  EXPECT_EQ(load_splits(cifar).train.size(), 10) << "no roots: a link is followed";
  auto roots = std::make_unique<data_roots_scope>(root);
  expect_error_naming([&] { load_splits(cifar); },
                      {root + "/cifar/data_batch_2.bin: resolved to '" +
                         fs::canonical(outside + "/batch.bin").string() + "'",
                       needle});
  // An image folder: a class folder that is a link out, then an image.
  write_three_classes(root + "/images");
  fs::rename(root + "/images/train/bee", outside + "/bee");
  fs::create_directory_symlink(outside + "/bee", root + "/images/train/bee");
  data_spec images;
  images.kind = "image-folder";
  images.path = root + "/images";
  images.shape = {3, 8, 8};
  roots.reset();
  EXPECT_EQ(load_splits(images).train.size(), 6);
  roots = std::make_unique<data_roots_scope>(root);
  expect_error_naming([&] { load_splits(images); }, {root + "/images/train/bee", needle});
  fs::remove(root + "/images/train/bee");
  fs::create_directories(root + "/images/train/bee");
  fs::create_symlink(outside + "/bee/a.png", root + "/images/train/bee/a.png");
  expect_error_naming([&] { load_splits(images); }, {root + "/images/train/bee/a.png", needle});
  // npy and IDX: a file that is a link out.
  write_npy_pair(outside + "/x.npy", root + "/y_train.npy", make_samples(4, 1, 2, 2, 2, 22));
  write_npy_pair(root + "/x_test.npy", root + "/y_test.npy", make_samples(4, 1, 2, 2, 2, 23));
  fs::create_symlink(outside + "/x.npy", root + "/x_train.npy");
  data_spec npy = npy_spec(root);
  expect_error_naming([&] { load_splits(npy); }, {root + "/x_train.npy", needle});
  write_idx(root, "tr-x.idx", "tr-y.idx", make_samples(4, 1, 2, 2, 2, 24), false, false);
  write_idx(root, "te-x.gz", "te-y.gz", make_samples(4, 1, 2, 2, 2, 25), true, false);
  fs::rename(root + "/tr-y.idx", outside + "/labels.idx");
  fs::create_symlink(outside + "/labels.idx", root + "/tr-y.idx");
  data_spec idx = idx_spec(root);
  roots.reset();
  EXPECT_EQ(load_splits(idx).train.size(), 4);
  roots = std::make_unique<data_roots_scope>(root);
  expect_error_naming([&] { read_data_header(idx); }, {root + "/tr-y.idx", needle});
}

// Item 4: a header parsed without a regex (a 40 KB one overflowed the
// stack: tests/apps/data_kinds_test.cpp runs that through the binary) and
// its dimensions read strictly.
TEST_F(dataset_kinds, npy_hostile_headers_are_refused_naming_file_and_field) {
  const auto s = make_samples(4, 1, 2, 2, 2, 26);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), s);
  write_bytes(path("y_train.npy"), npy_of("<i8", {4}, s.labels));
  const data_spec spec = npy_spec(dir_);
  const std::string x = path("x_train.npy");
  auto refused = [&](const std::string& header, const std::string& needle) {
    write_bytes(x, npy_bytes_with_header(header, s.pixels.data(), 16));
    expect_error_naming([&] { read_data_header(spec); }, x + ": " + needle);
  };
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (-4, 1, 2, 2), }",
          "the .npy header has a negative dimension in 'shape'");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (12345678901234567890123, 1, 2, 2), }",
          "the .npy header has a dimension of 23 digits in 'shape'");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1, 2, 2x), }",
          "the .npy header has a 'shape' that is not a tuple of integers");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1, 2, 2), 'extra': 1}",
          "the .npy header has an unknown key 'extra'");
  refused("{'descr': '|u1' 'fortran_order': False, 'shape': (4, 1, 2, 2)}",
          "the .npy header has 'descr' followed by neither ',' nor '}'");
  // 40 KB of padding inside the dict is still a header numpy reads.
  write_bytes(x, npy_bytes_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (4," +
                                         std::string(40000, ' ') + "1, 2, 2), }",
                                       s.pixels.data(), 16));
  EXPECT_EQ(read_data_header(spec).shape, (std::vector<int64_t>{1, 2, 2}));
  // Version 2 (a 4-byte length) of 100 KB: over numpy's 64 KiB.
  bytes v2 = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xa0, 0x86, 0x01, 0x00}; // 100000
  v2.resize(v2.size() + 100000, ' ');
  write_bytes(x, v2);
  expect_error_naming([&] { read_data_header(spec); },
                      x + ": .npy header of 100000 bytes, expected at most 65536");
}

// Item 7: a FIFO (or a directory) where a file is expected: refused at
// once, not read without end. A writer opens the FIFO after 3 s so that a
// reader that blocks returns (and the test fails) instead of hanging.
TEST_F(dataset_kinds, a_fifo_or_a_directory_as_a_data_file_is_refused_at_once) {
  const auto s = make_samples(4, 1, 2, 2, 2, 27);
  write_npy_pair(path("x_test.npy"), path("y_test.npy"), s);
  write_bytes(path("y_train.npy"), npy_of("<i8", {4}, s.labels));
  const std::string x = path("x_train.npy");
  ASSERT_EQ(::mkfifo(x.c_str(), 0600), 0);
  std::thread unblock([x] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    int fd = ::open(x.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0)
      ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  expect_error_naming([&] { read_data_header(npy_spec(dir_)); },
                      x + ": cannot open: not a regular file (a FIFO; expected a numpy .npy file)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  unblock.join();
  // A CIFAR batch that is a FIFO, then a directory.
  fs::create_directories(path("cifar"));
  write_cifar10(path("cifar"), make_samples(5, 3, 32, 32, 10, 28), make_samples(2, 3, 32, 32, 10, 29));
  data_spec cifar;
  cifar.kind = "cifar10";
  cifar.path = path("cifar");
  const std::string batch = path("cifar/test_batch.bin");
  fs::remove(batch);
  ASSERT_EQ(::mkfifo(batch.c_str(), 0600), 0);
  expect_error_naming([&] { read_data_header(cifar); },
                      batch + ": cannot open: not a regular file (a FIFO;");
  fs::remove(batch);
  fs::create_directory(batch);
  expect_error_naming([&] { read_data_header(cifar); },
                      batch + ": cannot open: not a regular file (a directory;");
}

// Item 8: an image's size is read from its header and checked before it is
// decoded: against the per-image cap (a 20000 x 20000 PNG of 400 KB decodes
// to 381 MiB) and against data.memory_mb.
TEST_F(dataset_kinds, an_image_too_large_once_decoded_is_refused_before_decoding) {
  write_three_classes(dir_);
  data_spec spec;
  spec.kind = "image-folder";
  spec.path = dir_;
  spec.shape = {3, 8, 8};
  const std::string big = dir_ + "/train/ant/a.png";
  write_blank_png(big, 20000, 20000);
  EXPECT_LT(fs::file_size(big), 2u << 20);
  expect_error_naming([&] { load_splits(spec); },
                      big + ": a 20000x20000 image of 3 channels takes 1145 MiB decoded, more "
                            "than the 256 MiB one image may take (scale it down)");
  write_blank_png(big, 4000, 3000);
  spec.memory_mb = 16; // 3 channels: 34.3 MiB
  expect_error_naming([&] { load_splits(spec); },
                      big + ": a 4000x3000 image of 3 channels takes 35 MiB decoded, more than "
                            "data.memory_mb = 16 MiB");
  spec.memory_mb = 64;
  EXPECT_EQ(load_splits(spec).train.size(), 6);
}

// Item 11: NaN or infinity in the samples: refused at load, counted, the
// first named, not trained into NaN weights.
TEST_F(dataset_kinds, non_finite_samples_are_refused_naming_file_and_sample) {
  std::vector<float> x(6 * 4, 0.5f);
  x[3 * 4 + 1] = std::numeric_limits<float>::quiet_NaN();
  x[5 * 4 + 0] = -std::numeric_limits<float>::infinity();
  write_bytes(path("x_train.npy"), npy_of("<f4", {6, 1, 2, 2}, x));
  write_bytes(path("y_train.npy"), npy_of<int64_t>("<i8", {6}, {0, 1, 0, 1, 0, 1}));
  write_bytes(path("x_test.npy"), npy_of("<f4", {2, 1, 2, 2}, std::vector<float>(8, 0.5f)));
  write_bytes(path("y_test.npy"), npy_of<int64_t>("<i8", {2}, {0, 1}));
  data_spec spec = npy_spec(dir_);
  expect_error_naming([&] { load_splits(spec); },
                      path("x_train.npy") + ": 2 of 6 samples hold NaN or infinite values, the "
                                            "first is sample 3");
  spec.train_limit = 3; // the samples read are finite
  EXPECT_EQ(load_splits(spec).train.size(), 3);
}

// Item 12: an empty split is refused where its headers are read, not
// reported as a test accuracy of 0 %.
TEST_F(dataset_kinds, an_empty_split_is_refused_naming_it) {
  write_cifar10(dir_, make_samples(5, 3, 32, 32, 10, 30), make_samples(2, 3, 32, 32, 10, 31));
  write_bytes(path("test_batch.bin"), {});
  data_spec cifar;
  cifar.kind = "cifar10";
  cifar.path = dir_;
  const std::string needle = dir_ + ": the test split has no samples";
  expect_error_naming([&] { read_data_header(cifar); }, needle);
  expect_error_naming([&] { load_splits(cifar); }, needle);
  expect_error_naming([&] { load_data(cifar, split::test); }, needle);
  const auto s = make_samples(4, 1, 2, 2, 2, 32);
  write_npy_pair(path("x_train.npy"), path("y_train.npy"), s);
  write_bytes(path("x_test.npy"), npy_bytes("|u1", {0, 1, 2, 2}, nullptr, 0));
  write_bytes(path("y_test.npy"), npy_of<int64_t>("<i8", {0}, {}));
  expect_error_naming([&] { read_data_header(npy_spec(dir_)); },
                      path("x_test.npy") + ": the test split has no samples");
}
