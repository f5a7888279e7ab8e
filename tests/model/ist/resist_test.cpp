#include "model/ist/resist.hpp"

#include <algorithm>
#include <set>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "tests/support/synthetic_sets.hpp"

using namespace baton::model;
using baton::model::testing::kept_synthetic;
using namespace baton::model::ist;

namespace {

/// 3x16x16 synthetic images, a few samples: resnet18 is slow on 2 cores.
const dataset& resist_train_data() { return kept_synthetic(16, 3, 16, 3); }
const dataset& resist_test_data() { return kept_synthetic(8, 3, 16, 4); }

resist_settings small_spec(int32_t workers) {
  resist_settings spec;
  spec.in_channels = 3;
  spec.workers = workers;
  spec.local_steps = 2;
  spec.batch_size = 4;
  spec.epochs = 1;
  spec.seed = 7;
  spec.optimizer = {0.05, 0.0, 0.0};
  spec.eval_batch = 8;
  return spec;
}

bool same(const layered_model& a, const layered_model& b) {
  const auto x = a.state(), y = b.state();
  if (x.size() != y.size())
    return false;
  for (size_t k = 0; k < x.size(); ++k)
    if (!torch::equal(x[k], y[k]))
      return false;
  return true;
}

} // namespace

TEST(resist, partitions_the_non_strided_blocks_of_the_middle_sections) {
  const auto m = make_resist_network(3, 10, 1);
  const auto partitioned = resist_partitioned_layers(m);
  ASSERT_EQ(partitioned.size(), 2u);
  EXPECT_EQ(m.layers()[partitioned[0]].name, "layer2_1");
  EXPECT_EQ(m.layers()[partitioned[1]].name, "layer3_1");
  EXPECT_EQ(m.layers().back().name, "fc2");
  EXPECT_THROW(resist_partitioned_layers(m.slice(0, 4)), error);
  EXPECT_DOUBLE_EQ(resist_eval_scale(2, 1), 1.0);
  EXPECT_DOUBLE_EQ(resist_eval_scale(2, 4), 0.5);
  EXPECT_DOUBLE_EQ(resist_eval_scale(22, 4), 0.25); // the authors' 1 / W
}

TEST(resist, every_block_is_dealt_to_at_least_one_worker) {
  for (size_t blocks : {size_t{1}, size_t{2}, size_t{3}, size_t{7}})
    for (int32_t workers = 1; workers <= 5; ++workers) {
      std::set<std::vector<std::vector<size_t>>> distinct;
      for (int64_t round = 0; round < 60; ++round) {
        const auto deal = make_resist_deal(blocks, workers, 11, round);
        ASSERT_EQ(deal.held.size(), static_cast<size_t>(workers));
        for (size_t b = 0; b < blocks; ++b) {
          const auto holders = deal.holders(b);
          ASSERT_FALSE(holders.empty()) << blocks << " blocks, W " << workers << ", round "
                                        << round << ": block " << b << " dealt to nobody";
          if (blocks >= static_cast<size_t>(workers))
            EXPECT_EQ(holders.size(), 1u);
        }
        size_t least = blocks, most = 0;
        for (const auto& mine : deal.held) {
          EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
          EXPECT_EQ(std::set<size_t>(mine.begin(), mine.end()).size(), mine.size());
          least = std::min(least, mine.size());
          most = std::max(most, mine.size());
        }
        EXPECT_GE(least, 1u); // every worker trains at least one block
        EXPECT_LE(most - least, 1u);
        EXPECT_EQ(deal.held, make_resist_deal(blocks, workers, 11, round).held);
        distinct.insert(deal.held);
      }
      if (blocks > 1 && workers > 1)
        EXPECT_GT(distinct.size(), 1u) << "the deal never changes";
    }
  EXPECT_THROW(make_resist_deal(0, 2, 1, 0), error);
  EXPECT_THROW(make_resist_deal(2, 0, 1, 0), error);
}

TEST(resist, a_skipped_block_is_the_identity_and_stays_as_it_was) {
  auto m = make_resist_network(3, 10, 2);
  const auto partitioned = resist_partitioned_layers(m);
  resist_deal deal = make_resist_deal(2, 2, 3, 0);
  const auto active = resist_active_layers(m.size(), partitioned, deal, 0);
  const size_t skipped = deal.holds(0, 0) ? partitioned[1] : partitioned[0];
  EXPECT_FALSE(active[skipped]);
  const auto before = m.layers()[skipped].module.ptr()->parameters()[0].clone();
  const auto& data = resist_train_data();
  resist_local_steps(m, active, data, {{0, 1, 2, 3}, {4, 5, 6, 7}}, 0, {0.1, 0.9, 0.0});
  EXPECT_TRUE(torch::equal(before, m.layers()[skipped].module.ptr()->parameters()[0]));
  // Skipping a layer in the forward is the same as removing it.
  std::vector<named_layer> kept;
  for (size_t i = 0; i < m.size(); ++i)
    if (active[i])
      kept.push_back(m.layers()[i]);
  torch::NoGradGuard no_grad;
  const auto x = data.images.slice(0, 0, 4);
  EXPECT_TRUE(torch::equal(resist_forward(m, active, x), layered_model(kept).forward(x)));
}

TEST(resist, the_evaluation_scales_the_residual_branch) {
  auto m = make_resist_network(3, 10, 4);
  m.train(false);
  torch::NoGradGuard no_grad;
  auto block = m.layers()[static_cast<size_t>(m.index_of("layer1_0"))]; // shares the module
  const auto x = torch::relu(torch::randn({2, 64, 4, 4}, at::detail::createCPUGenerator(5)));
  const auto plain = block.module.forward(x);
  ASSERT_TRUE(set_residual_scale(block, 0.0));
  EXPECT_TRUE(torch::equal(block.module.forward(x), x)); // relu(0 + x) for x >= 0
  ASSERT_TRUE(set_residual_scale(block, 1.0));
  EXPECT_TRUE(torch::equal(block.module.forward(x), plain));
  EXPECT_FALSE(set_residual_scale(m.layers().front(), 0.5)); // conv1 is no block
}

TEST(resist, resnet18_takes_the_channels_of_its_data) {
  auto one = make_resist_network(1, 10, 6);
  auto three = make_resist_network(3, 10, 6);
  EXPECT_EQ(parameter_count(three) - parameter_count(one), 64 * 7 * 7 * 2);
  torch::NoGradGuard no_grad;
  one.train(false);
  EXPECT_EQ(one.forward(torch::zeros({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(resist, the_merge_averages_shared_layers_over_all_and_blocks_over_holders) {
  const auto deal = make_resist_deal(2, 2, 9, 0);
  std::vector<layered_model> replicas;
  for (int32_t w = 0; w < 2; ++w) {
    replicas.push_back(make_resist_network(1, 10, 8));
    torch::NoGradGuard no_grad;
    for (auto& t : replicas.back().state())
      t.fill_(w == 0 ? 1 : (t.is_floating_point() ? 4 : 6)); // ints: (1 + 6) / 2 floors to 3
  }
  auto merged = make_resist_network(1, 10, 8);
  const auto partitioned = resist_partitioned_layers(merged);
  resist_merge(merged, replicas, partitioned, deal);
  const auto layers = resist_state_layers(merged);
  const auto state = merged.state();
  ASSERT_EQ(layers.size(), state.size());
  for (size_t k = 0; k < state.size(); ++k) {
    double expected = state[k].is_floating_point() ? 2.5 : 3;
    for (size_t b = 0; b < partitioned.size(); ++b)
      if (layers[k] == partitioned[b])
        expected = deal.holds(0, b) ? 1 : (state[k].is_floating_point() ? 4 : 6);
    EXPECT_EQ(state[k].min().item<double>(), expected) << merged.named_state()[k].first;
    EXPECT_EQ(state[k].max().item<double>(), expected) << merged.named_state()[k].first;
  }
  EXPECT_THROW(resist_average({}), error);
}

TEST(resist, one_worker_is_plain_sgd_bit_for_bit) {
  const auto spec = small_spec(1);
  const auto result = run_resist_local(resist_train_data(), resist_test_data(), spec);
  EXPECT_EQ(result.steps, 4);
  EXPECT_EQ(result.rounds, 2);

  auto plain = make_resist_network(spec.in_channels, spec.classes, spec.seed);
  plain.train(true);
  torch::optim::SGD sgd(plain.parameters(), torch::optim::SGDOptions(spec.optimizer.lr));
  for (const auto &ids :
       ist::worker_minibatches(resist_train_data().size(), spec.seed, 0, 0, 1, 4)) {
    auto [images, labels] = gather(resist_train_data(), ids);
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(plain.forward(images), labels).backward();
    sgd.step();
  }
  EXPECT_EQ(result.weights_digest, weights_digest(plain));
  EXPECT_TRUE(same(result.network, plain)); // running statistics too
}

TEST(resist, two_workers_are_deterministic_and_train) {
  const auto spec = small_spec(2);
  const auto a = run_resist_local(resist_train_data(), resist_test_data(), spec);
  const auto b = run_resist_local(resist_train_data(), resist_test_data(), spec);
  EXPECT_EQ(a.weights_digest, b.weights_digest);
  EXPECT_EQ(a.steps, 2);
  EXPECT_EQ(a.samples, 16);
  EXPECT_NE(a.weights_digest, weights_digest(make_resist_network(3, 10, spec.seed)));
  ASSERT_EQ(a.test_accuracy.size(), 1u);
  auto bad = spec;
  bad.in_channels = 1;
  EXPECT_THROW(run_resist_local(resist_train_data(), resist_test_data(), bad), error);
}
