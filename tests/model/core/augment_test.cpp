// data.augment (model/core/augment.hpp): the crop after zero padding and the
// horizontal flip on small tensors whose every pixel is known, the draws as
// a function of (seed, sample, epoch) alone, and the refusals.

#include "model/core/augment.hpp"

#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/error.hpp"

using namespace baton::model;

namespace {

/// [n, c, 4, 5] with pixel values 1, 2, 3, ... (never 0, the padding).
at::Tensor counting(int64_t n, int64_t c = 1) {
  return torch::arange(1, 1 + n * c * 20, torch::kFloat32).view({n, c, 4, 5});
}

data_spec::augment_spec spec_of(int64_t crop, bool flip) {
  data_spec::augment_spec s;
  s.crop = crop;
  s.flip = flip;
  return s;
}

} // namespace

TEST(augment, draws_depend_on_seed_sample_and_epoch_only) {
  const auto s = spec_of(2, true);
  const auto d = draw_augmentation(s, 42, 7, 3);
  const auto again = draw_augmentation(s, 42, 7, 3);
  EXPECT_EQ(std::tie(d.top, d.left, d.flip), std::tie(again.top, again.left, again.flip));
  // Over 200 samples: offsets cover 0..2c, about half are flipped, and
  // another epoch or seed draws differently.
  std::set<int64_t> tops;
  int flips = 0, other_epoch = 0, other_seed = 0;
  for (int64_t id = 0; id < 200; ++id) {
    const auto a = draw_augmentation(s, 42, id, 0);
    const auto b = draw_augmentation(s, 42, id, 1);
    const auto c = draw_augmentation(s, 43, id, 0);
    tops.insert(a.top);
    EXPECT_LE(a.left, 4);
    flips += a.flip ? 1 : 0;
    other_epoch += std::tie(a.top, a.left, a.flip) != std::tie(b.top, b.left, b.flip) ? 1 : 0;
    other_seed += std::tie(a.top, a.left, a.flip) != std::tie(c.top, c.left, c.flip) ? 1 : 0;
  }
  EXPECT_EQ(tops, (std::set<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
  EXPECT_GT(other_epoch, 150);
  EXPECT_GT(other_seed, 150);
  // Off, nothing moves: crop 0 draws offset 0, flip off never flips.
  for (int64_t id = 0; id < 50; ++id) {
    const auto none = draw_augmentation(spec_of(0, false), 42, id, 0);
    EXPECT_EQ(std::tie(none.top, none.left, none.flip), std::make_tuple(0L, 0L, false));
  }
}

TEST(augment, flip_mirrors_each_drawn_sample_left_right) {
  const auto s = spec_of(0, true);
  const auto x = counting(16, 2);
  std::vector<int64_t> ids(16);
  for (int64_t i = 0; i < 16; ++i)
    ids[static_cast<size_t>(i)] = 100 + i;
  const auto y = augment(x, ids, 5, s, 9, {});
  int flipped = 0;
  for (int64_t i = 0; i < 16; ++i) {
    const bool flip = draw_augmentation(s, 9, ids[static_cast<size_t>(i)], 5).flip;
    flipped += flip ? 1 : 0;
    // Row r of a mirrored image is row r read right to left.
    EXPECT_TRUE(torch::equal(y[i], flip ? x[i].flip({2}) : x[i])) << "sample " << i;
    if (flip)
      EXPECT_EQ(y[i][1][2][0].item<float>(), x[i][1][2][4].item<float>());
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 16);
  EXPECT_TRUE(torch::equal(x, counting(16, 2))); // the input is left as it was
}

// crop 1 on 4x5 images: the 6x7 padded image (border `pad`) cut back at the
// drawn offset; each pixel computed by hand.
TEST(augment, crop_cuts_the_padded_image_at_the_drawn_offset) {
  const auto s = spec_of(1, false);
  const auto x = counting(12);
  std::vector<int64_t> ids(12);
  for (int64_t i = 0; i < 12; ++i)
    ids[static_cast<size_t>(i)] = i;
  const float pad = -0.5f;
  const auto y = augment(x, ids, 2, s, 1, {pad});
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < 12; ++i) {
    const auto d = draw_augmentation(s, 1, i, 2);
    offsets.insert({d.top, d.left});
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        // Output (r, c) is padded (r + top, c + left): image (r + top - 1, c + left - 1).
        const int64_t rr = r + d.top - 1, cc = c + d.left - 1;
        const float want = rr < 0 || rr >= 4 || cc < 0 || cc >= 5 ? pad
                                                                   : x[i][0][rr][cc].item<float>();
        EXPECT_EQ(y[i][0][r][c].item<float>(), want) << i << " " << r << " " << c;
      }
  }
  EXPECT_GT(offsets.size(), 3u); // the draws are not all one offset
}

TEST(augment, pads_each_channel_with_its_own_value) {
  const auto s = spec_of(3, false);
  const auto x = counting(20, 3);
  std::vector<int64_t> ids(20);
  for (int64_t i = 0; i < 20; ++i)
    ids[static_cast<size_t>(i)] = i;
  const auto y = augment(x, ids, 0, s, 7, {-1.0, -2.0, -3.0});
  for (int64_t i = 0; i < 20; ++i) {
    const auto d = draw_augmentation(s, 7, i, 0);
    if (d.top == 0) // three padding rows above the image: row 0 is padding
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_TRUE(torch::all(y[i][k][0] == -1.0f - static_cast<float>(k)).item<bool>());
  }
}

TEST(augment, gather_training_augments_the_training_part_only) {
  dataset data = make_synthetic(10, 1, 6, 6, 3, 5);
  data.normalisation = {{0.5}, {0.25}, "test"};
  const std::vector<int64_t> ids{3, 1, 4};
  // Without data.augment it is gather.
  EXPECT_TRUE(torch::equal(gather_training(data, ids, 0).first, gather(data, ids).first));
  data.augment = spec_of(2, true);
  data.augment_seed = 11;
  const auto [images, labels] = gather_training(data, ids, 4);
  EXPECT_TRUE(torch::equal(labels, gather(data, ids).second));
  // Padded with the normalised raw zero, (0 - 0.5) / 0.25.
  EXPECT_TRUE(torch::equal(images, augment(gather(data, ids).first, ids, 4, data.augment, 11,
                                           {-2.0})));
  EXPECT_FALSE(torch::equal(images, gather_training(data, ids, 5).first)); // another epoch
  EXPECT_TRUE(torch::equal(images, gather_training(data, ids, 4).first));
}

TEST(augment, refuses_what_it_cannot_augment) {
  EXPECT_EQ(augment_refusal(spec_of(4, true), "fashion-mnist", {1, 28, 28}), "");
  EXPECT_EQ(augment_refusal(spec_of(0, false), "synthetic", {1, 28, 28}), ""); // off
  EXPECT_NE(augment_refusal(spec_of(-1, false), "cifar10", {3, 32, 32}).find("0 or more"),
            std::string::npos);
  EXPECT_NE(augment_refusal(spec_of(0, true), "synthetic", {1, 28, 28}).find("per-pixel"),
            std::string::npos);
  EXPECT_NE(augment_refusal(spec_of(1, false), "npy", {1, 1, 30}).find("not"),
            std::string::npos);
  EXPECT_NE(augment_refusal(spec_of(28, false), "fashion-mnist", {1, 28, 28}).find("28 pixels"),
            std::string::npos);
  EXPECT_THROW(augment(counting(2), {0}, 0, spec_of(1, true), 1, {}), error);
  EXPECT_NE(augment_cache_refusal("backbone.cache").find("every epoch"), std::string::npos);
}
