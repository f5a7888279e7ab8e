#include "model/core/checkpoint.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "tests/support/model_errors.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/tiny_model.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using namespace baton::model;
using baton::model::testing::spec_of;
using baton::model::testing::expect_error_naming;

namespace {

class checkpoint : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  scratch_dir scratch_{"checkpoint"};
  const fs::path dir_ = scratch_.path();
};

} // namespace

TEST_F(checkpoint, whole_model_round_trip_creates_directories_atomically) {
  auto saved = make_model(spec_of("convnet", 1));
  const std::string file = path("a/b/convnet.pt");
  save_checkpoint(saved, file);
  ASSERT_TRUE(fs::is_regular_file(file));
  // Only the checkpoint is left: the temporary file was renamed into place.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "a/b"), fs::directory_iterator{}), 1);
  auto loaded = make_model(spec_of("convnet", 2));
  ASSERT_NE(weights_digest(loaded), weights_digest(saved));
  load_checkpoint(loaded, file);
  EXPECT_EQ(weights_digest(loaded), weights_digest(saved));
  // Overwriting an existing checkpoint works too.
  save_checkpoint(make_model(spec_of("convnet", 3)), file);
  load_checkpoint(loaded, file);
  EXPECT_EQ(weights_digest(loaded), weights_digest(make_model(spec_of("convnet", 3))));
}

// The settings a pretraining stores with its weights read back as written,
// without loading the tensors; a file without them (an export, an older
// checkpoint) has none, and a file that is no model file is refused by name.
TEST_F(checkpoint, the_settings_stored_with_a_checkpoint_read_back) {
  const auto model = make_model(spec_of("convnet", 1));
  const std::string text = "backbone.model: convnet\nseed: 42\n";
  save_checkpoint(model, path("with.pt"), text);
  EXPECT_EQ(checkpoint_settings(path("with.pt")), text);
  auto loaded = make_model(spec_of("convnet", 2));
  load_checkpoint(loaded, path("with.pt")); // the checksum covers the tensors only
  EXPECT_EQ(weights_digest(loaded), weights_digest(model));

  save_checkpoint(model, path("without.pt"));
  EXPECT_EQ(checkpoint_settings(path("without.pt")), std::nullopt);
  std::ofstream(path("junk.pt")) << "not a zip archive";
  expect_error_naming([&] { checkpoint_settings(path("junk.pt")); },
                      {path("junk.pt"), "not a readable checkpoint"});
  expect_error_naming([&] { checkpoint_settings(path("absent.pt")); },
                      {path("absent.pt"), "not found"});
}

// Batch norm's running statistics are buffers, not parameters: a checkpoint
// holds them too, so a saved resnet18 evaluates as it did.
TEST_F(checkpoint, batch_norm_running_statistics_round_trip) {
  auto saved = make_model(spec_of("resnet18", 1));
  saved.train(true);
  {
    torch::NoGradGuard no_grad;
    saved.forward(torch::randn({4, 3, 32, 32}));
  }
  save_checkpoint(saved, path("resnet18.pt"));
  auto loaded = make_model(spec_of("resnet18", 1));
  auto before = saved.named_buffers();
  ASSERT_FALSE(before.empty());
  ASSERT_FALSE(torch::equal(before.front().second, loaded.named_buffers().front().second));
  load_checkpoint(loaded, path("resnet18.pt"));
  auto after = loaded.named_buffers();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_TRUE(torch::equal(after[i].second, before[i].second)) << after[i].first;
  }
}

TEST_F(checkpoint, whole_checkpoint_loads_into_a_slice) {
  auto saved = make_model(spec_of("convnet", 1));
  save_checkpoint(saved, path("convnet.pt"));
  auto other = make_model(spec_of("convnet", 2));
  const auto before = other.named_parameters();
  std::vector<at::Tensor> untouched;
  for (const auto& p : before)
    untouched.push_back(p.second.clone());
  const size_t begin = other.index_of("conv3"), end = other.index_of("pool2") + 1;
  auto middle = other.slice(begin, end);
  load_checkpoint(middle, path("convnet.pt"));
  EXPECT_EQ(weights_digest(middle), weights_digest(saved.slice(begin, end)));
  // Layers inside the slice hold the file's weights, those outside keep their own (the
  // biases start at 0 in both models, so each is compared with where it should come from).
  const auto from_file = saved.named_parameters();
  for (size_t i = 0; i < before.size(); ++i) {
    const bool inside = before[i].first.rfind("conv3.", 0) == 0 || before[i].first.rfind("conv4.", 0) == 0;
    EXPECT_TRUE(torch::equal(before[i].second, inside ? from_file[i].second : untouched[i]))
      << before[i].first;
  }
  EXPECT_FALSE(torch::equal(from_file[0].second, untouched[0])); // conv1.weight: other seeds
}

TEST_F(checkpoint, missing_key_names_file_and_key) {
  auto backbone = make_model(spec_of("convnet", 1));
  save_checkpoint(backbone.slice(0, 5), path("front.pt"));
  auto whole = make_model(spec_of("convnet", 2));
  const std::string before = weights_digest(whole);
  expect_error_naming([&] { load_checkpoint(whole, path("front.pt")); },
                      {path("front.pt"), "conv3.weight"});
  // A failed load changes nothing.
  EXPECT_EQ(weights_digest(whole), before);
}

TEST_F(checkpoint, shape_mismatch_names_file_and_key) {
  save_checkpoint(make_model(spec_of("head", 1, 10)), path("head10.pt"));
  auto four = make_model(spec_of("head", 1, 4));
  expect_error_naming([&] { load_checkpoint(four, path("head10.pt")); },
                      {path("head10.pt"), "fc2.weight"});
}

TEST_F(checkpoint, missing_corrupt_and_truncated_files) {
  auto m = make_model(spec_of("head", 1));
  expect_error_naming([&] { load_checkpoint(m, path("absent.pt")); }, {path("absent.pt")});
  {
    std::ofstream out(path("garbage.pt"), std::ios::binary);
    out << "this is not a zip archive";
  }
  expect_error_naming([&] { load_checkpoint(m, path("garbage.pt")); }, {path("garbage.pt")});
  save_checkpoint(m, path("whole.pt"));
  const auto size = fs::file_size(path("whole.pt"));
  fs::resize_file(path("whole.pt"), size / 2);
  expect_error_naming([&] { load_checkpoint(m, path("whole.pt")); }, {path("whole.pt")});
}

TEST_F(checkpoint, unwritable_destination_is_an_error) {
  {
    std::ofstream out(path("file"));
    out << "x";
  }
  // The parent "directory" is a regular file.
  EXPECT_THROW(save_checkpoint(make_model(spec_of("head", 1)), path("file/sub/head.pt")), error);
}

// A tensor two layers share (tied weights) is one key of the file, and
// loading it sets both layers (they keep sharing it).
TEST_F(checkpoint, a_tied_tensor_is_saved_once_and_stays_tied) {
  using baton::model::testing::tied_model;
  auto saved = tied_model();
  {
    torch::NoGradGuard no_grad;
    saved.named_parameters()[2].second.add_(0.5); // fc2.weight, also fc2b's
  }
  const std::string file = path("tied.pt");
  save_checkpoint(saved, file);
  std::vector<std::string> keys;
  for (const auto& p : torch::jit::load(file).named_parameters())
    keys.push_back(p.name);
  EXPECT_EQ(keys, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                            "fc2b.bias", "fc3.weight", "fc3.bias"}));
  auto loaded = tied_model();
  ASSERT_NE(weights_digest(loaded), weights_digest(saved));
  load_checkpoint(loaded, file);
  EXPECT_EQ(weights_digest(loaded), weights_digest(saved));
  const auto weight = [&](const char* layer) {
    return loaded.layers()[loaded.index_of(layer)].module.ptr()->named_parameters()["weight"];
  };
  EXPECT_TRUE(weight("fc2b").is_same(weight("fc2")));
  EXPECT_TRUE(torch::equal(weight("fc2b"), saved.named_parameters()[2].second));
}
