#include "model/core/feature_cache.hpp"

#include <set>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/data_parallel/data_parallel.hpp"
#include "model/core/error.hpp"
#include "tests/support/tiny_model.hpp"
#include "model/core/freezing.hpp"
#include "model/core/pretrain.hpp"
#include "tests/support/synthetic_sets.hpp"

using namespace baton::model;
using baton::model::testing::kept_synthetic;
using baton::model::testing::batch_only_bn_model;
using baton::model::testing::bn_model;

namespace {

const dataset& train_data() { return kept_synthetic(64, 1, 28, 3); }
const dataset& test_data() { return kept_synthetic(16, 1, 28, 4); }

data_parallel_settings frozen_spec() {
  data_parallel_settings spec;
  spec.workers = 2;
  spec.batch_size = 8;
  spec.epochs = 3;
  spec.optimizer = {0.05, 0.9, 1e-3};
  spec.freeze_up_to = "relu1";
  return spec;
}

} // namespace

TEST(feature_cache, hits_misses_and_the_budget) {
  feature_cache cache(1.0 / 1024); // 1 kiB: two rows of 128 floats
  const at::Tensor row = torch::ones({128});
  EXPECT_FALSE(cache.find(1).defined());
  EXPECT_TRUE(cache.insert(1, row));
  EXPECT_TRUE(cache.insert(2, row * 2));
  EXPECT_FALSE(cache.insert(3, row * 3)); // over the budget: recomputed every time
  EXPECT_TRUE(torch::equal(cache.find(2), row * 2));
  EXPECT_FALSE(cache.find(3).defined());
  const auto s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.rejected, 1);
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.bytes, 1024);
  EXPECT_THROW(feature_cache(-1), error);
}

TEST(feature_cache, a_new_freeze_point_drops_every_row) {
  feature_cache cache(1);
  cache.set_freeze_point(3);
  cache.insert(7, torch::ones({4}));
  cache.set_freeze_point(3); // unchanged: rows stay
  EXPECT_TRUE(cache.find(7).defined());
  cache.set_freeze_point(5);
  EXPECT_EQ(cache.freeze_point(), 5u);
  EXPECT_FALSE(cache.find(7).defined());
  EXPECT_EQ(cache.stats().invalidations, 1);
  EXPECT_EQ(cache.stats().bytes, 0);
}

TEST(feature_cache, a_row_is_a_copy_not_a_view_of_its_batch) {
  feature_cache cache(1);
  at::Tensor batch = torch::ones({4, 8});
  cache.insert(0, batch[1]);
  batch.zero_();
  EXPECT_EQ(cache.find(0).sum().item<float>(), 8.0f);
}

TEST(feature_cache, cached_features_equal_recomputed_ones) {
  const auto m = bn_model();
  const auto prefix = m.slice(0, 4);
  apply_freeze_point(m, 4);
  feature_cache cache(1);
  cache.set_freeze_point(4);
  const std::vector<int64_t> first{3, 9, 12, 40}, second{40, 1, 3, 50, 9, 7};
  frozen_features(prefix, &cache, train_data(), first);
  const at::Tensor cached = frozen_features(prefix, &cache, train_data(), second);
  EXPECT_TRUE(torch::equal(cached, frozen_features(prefix, nullptr, train_data(), second)));
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 7);
  EXPECT_EQ(cache.stats().entries, 7);
}

// In canonical blocks a sample's row has the same bits whatever minibatch
// (size, order, neighbours) it is computed in.
TEST(feature_cache, canonical_blocks_make_a_row_independent_of_its_minibatch) {
  const auto m = bn_model();
  const auto prefix = m.slice(0, 4);
  apply_freeze_point(m, 4);
  const std::vector<int64_t> a{3, 9, 12, 40, 41, 42, 43, 1, 2, 60, 61}, b{41, 7, 50, 51, 3};
  for (int64_t block : {1, 3, 4, 8}) {
    const at::Tensor fa = frozen_features(prefix, nullptr, train_data(), a, block);
    const at::Tensor fb = frozen_features(prefix, nullptr, train_data(), b, block);
    ASSERT_EQ(fa.size(0), 11);
    EXPECT_TRUE(torch::equal(fa[4], fb[0])) << block;
    EXPECT_TRUE(torch::equal(fa[0], fb[4])) << block;
    EXPECT_TRUE(torch::allclose(fa, frozen_features(prefix, nullptr, train_data(), a, 0), 1e-5,
                                1e-6));
  }
}

// DESIGN invariant 9: a run that reads frozen features from the cache ends
// with the weights of the same run that recomputes them, also when the
// budget holds only some of the samples.
TEST(feature_cache, cache_equals_no_cache_bit_for_bit) {
  auto spec = frozen_spec();
  const auto plain = run_data_parallel_local(bn_model, train_data(), test_data(), spec);
  spec.cache = true;
  const auto cached = run_data_parallel_local(bn_model, train_data(), test_data(), spec);
  EXPECT_EQ(cached.weights_digest, plain.weights_digest);
  // Each worker caches the samples of its own shares, which the reshuffled
  // order changes every epoch: a sample misses once per worker that sees it.
  int64_t misses = 0;
  for (int32_t w = 0; w < 2; ++w) {
    std::set<int64_t> seen;
    for (int32_t epoch = 0; epoch < 3; ++epoch)
      for (auto id : worker_share(64, spec.seed, epoch, w, 2, spec.remainder))
        seen.insert(id);
    misses += static_cast<int64_t>(seen.size());
  }
  EXPECT_EQ(cached.cache.misses, misses);
  EXPECT_EQ(cached.cache.hits, 3 * 64 - misses);
  EXPECT_GT(cached.cache.hits, 0);
  EXPECT_EQ(cached.cache.bytes, misses * 32 * 4);
  spec.cache_mb = 20.0 * 32 * 4 / (1024 * 1024); // 20 rows per worker
  const auto partial = run_data_parallel_local(bn_model, train_data(), test_data(), spec);
  EXPECT_EQ(partial.weights_digest, plain.weights_digest);
  EXPECT_EQ(partial.cache.entries, 40);
  EXPECT_GT(partial.cache.rejected, 0);
}

TEST(feature_cache, cache_equals_no_cache_with_adaptive_freezing) {
  auto spec = frozen_spec();
  spec.freeze_up_to.clear();
  spec.freeze_groups = {"relu1", "relu2"};
  spec.adaptive.interval = 1;
  spec.epochs = 4;
  const auto plain = run_data_parallel_local(bn_model, train_data(), test_data(), spec);
  spec.cache = true;
  const auto cached = run_data_parallel_local(bn_model, train_data(), test_data(), spec);
  EXPECT_EQ(cached.weights_digest, plain.weights_digest);
  EXPECT_EQ(cached.frozen_layers, plain.frozen_layers);
  EXPECT_GT(cached.frozen_layers, 0u); // the cache was used
  EXPECT_GT(cached.cache.hits, 0);
}

TEST(feature_cache, refuses_a_prefix_that_normalises_over_the_batch) {
  auto spec = frozen_spec();
  spec.cache = true;
  EXPECT_THROW(run_data_parallel_local(batch_only_bn_model, train_data(), test_data(), spec),
               error);
  spec.feature_block = 0; // one batch: a cached row could differ from a recomputed one
  EXPECT_THROW(run_data_parallel_local(bn_model, train_data(), test_data(), spec), error);
  spec.feature_block = 4;
  spec.cache = false; // without the cache it is only a frozen prefix
  EXPECT_NO_THROW(run_data_parallel_local(batch_only_bn_model, train_data(), test_data(), spec));
}

// The reference workload: convnet + classifier on Fashion-MNIST, the first
// convnet group (conv1 .. pool1) frozen and cached, from the second epoch on
// read from the cache: the convolutions' rows too equal their recomputation.
TEST(feature_cache, convnet_on_fashion_mnist_cache_equals_no_cache) {
  const dataset train = load_fashion_mnist(default_fashion_mnist_dir, split::train, 96);
  const dataset test = load_fashion_mnist(default_fashion_mnist_dir, split::test, 32);
  model_spec backbone;
  backbone.seed = 9;
  const model_factory make = [&] { return make_pretrain_model(backbone, 10); };
  data_parallel_settings spec;
  spec.workers = 2;
  spec.batch_size = 16;
  spec.epochs = 2;
  spec.optimizer = {0.02, 0.9, 0};
  spec.freeze_up_to = "pool1";
  const auto plain = run_data_parallel_local(make, train, test, spec);
  spec.cache = true;
  const auto cached = run_data_parallel_local(make, train, test, spec);
  EXPECT_EQ(cached.weights_digest, plain.weights_digest);
  EXPECT_GT(cached.cache.hits, 0);
  EXPECT_EQ(weights_digest(cached.model.slice(0, 5)), weights_digest(make().slice(0, 5)));
}

// The images-at-hand form (a transfer stage's microbatch) gives exactly the
// rows of the data-set form, with and without a cache and blocks; K = 0 and
// no cache is one plain forward of the inputs.
TEST(feature_cache, rows_from_inputs_equal_rows_from_the_data_set) {
  const auto m = bn_model();
  const auto prefix = m.slice(0, 4);
  apply_freeze_point(m, 4);
  const std::vector<int64_t> ids{41, 7, 50, 51, 3, 7, 12};
  const at::Tensor images = gather(train_data(), ids).first;
  for (int64_t block : {0, 1, 3, 4}) {
    SCOPED_TRACE(block);
    int64_t forwarded = 0;
    const at::Tensor rows = frozen_features(prefix, nullptr, images, ids, block, &forwarded);
    EXPECT_TRUE(torch::equal(rows, frozen_features(prefix, nullptr, train_data(), ids, block)));
    EXPECT_EQ(forwarded % std::max<int64_t>(block, 1), 0);
    EXPECT_GE(forwarded, static_cast<int64_t>(ids.size()));
    if (block == 0) {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::equal(rows, prefix.forward(images)));
      continue;
    }
    feature_cache by_inputs(1), by_data(1);
    frozen_features(prefix, &by_inputs, images.slice(0, 0, 3), {41, 7, 50}, block);
    frozen_features(prefix, &by_data, train_data(), {41, 7, 50}, block);
    const at::Tensor a = frozen_features(prefix, &by_inputs, images, ids, block);
    EXPECT_TRUE(torch::equal(a, frozen_features(prefix, &by_data, train_data(), ids, block)));
    EXPECT_TRUE(torch::equal(a, rows));
    EXPECT_EQ(by_inputs.stats().hits, by_data.stats().hits);
  }
  EXPECT_THROW(frozen_features(prefix, nullptr, images, {1, 2}, 4), error);
  EXPECT_THROW(frozen_features(prefix, nullptr, images.slice(0, 0, 2), {1, -2}, 4), error);
}

// frozen_backbone: the transfer stage's features. Test-split ids are kept
// apart from training ids; per-epoch counts say what ran.
TEST(feature_cache, frozen_backbone_counts_and_keeps_the_splits_apart) {
  const auto m = bn_model();
  const auto prefix = m.slice(0, 4);
  apply_freeze_point(m, 4);
  frozen_backbone cached{prefix, {true, 1, 4}};
  frozen_backbone plain{prefix, {false, 1, 4}};
  const std::vector<int64_t> ids{3, 9, 12, 14}; // in both splits (the test split has 16)
  const at::Tensor train_images = gather(train_data(), ids).first;
  const at::Tensor test_images = gather(test_data(), ids).first;
  for (int epoch = 0; epoch < 2; ++epoch) {
    EXPECT_TRUE(torch::equal(cached.features(train_images, ids, false),
                             plain.features(train_images, ids, false)));
    // Same ids, other split: the test rows, not the cached training rows.
    EXPECT_TRUE(torch::equal(cached.features(test_images, ids, true),
                             plain.features(test_images, ids, true)));
    cached.end_epoch();
    plain.end_epoch();
  }
  ASSERT_EQ(cached.epochs().size(), 2u);
  EXPECT_EQ(cached.epochs()[0].train_computed, 4);
  EXPECT_EQ(cached.epochs()[0].eval_computed, 4);
  EXPECT_EQ(cached.epochs()[0].forward_rows, 8);
  EXPECT_EQ(cached.epochs()[1].train_samples, 4);
  EXPECT_EQ(cached.epochs()[1].train_computed, 0);
  EXPECT_EQ(cached.epochs()[1].eval_computed, 0);
  EXPECT_EQ(cached.epochs()[1].forward_rows, 0);
  EXPECT_EQ(plain.epochs()[1].train_computed, 4);
  EXPECT_EQ(cached.total().train_samples, 8);
  EXPECT_EQ(cached.stats().entries, 8);
  EXPECT_EQ(cached.stats().hits, 8);
  EXPECT_THROW(cached.features(train_images, {1, 2}, false), error);      // ids != rows
  EXPECT_THROW(cached.features(train_images, {}, false), error);          // no ids
  EXPECT_THROW(cached.features(train_images.slice(0, 0, 1), {eval_key_offset}, true), error);
  // Without cache and blocks the ids are not needed: one forward.
  frozen_backbone whole{prefix, {}};
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(whole.features(train_images, {}, false), prefix.forward(train_images)));
}

TEST(feature_cache, frozen_backbone_refuses_what_it_cannot_cache) {
  const auto m = bn_model();
  apply_freeze_point(m, 4);
  EXPECT_THROW(frozen_backbone(m.slice(0, 4), {true, 1, 0}), error);  // no canonical blocks
  EXPECT_THROW(frozen_backbone(m.slice(0, 4), {true, -1, 4}), error); // negative budget
  EXPECT_THROW(frozen_backbone(m.slice(0, 4), {false, 1, -1}), error);
  const auto batch_only = batch_only_bn_model();
  apply_freeze_point(batch_only, 4);
  EXPECT_THROW(frozen_backbone(batch_only.slice(0, 4), {true, 1, 4}), error);
  EXPECT_NO_THROW(frozen_backbone(batch_only.slice(0, 4), {false, 1, 4}));
}
