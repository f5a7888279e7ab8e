#include "model/core/training.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/batches.hpp"
#include "model/core/pretrain.hpp"
#include "model/transfer/reference.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/tiny_model.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using namespace baton::model;
using baton::model::testing::spec_of;

namespace {

at::Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen);
}

/// ||a - b|| / ||b|| over every parameter, the largest.
double relative_difference(const layered_model& a, const layered_model& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, ((pa[i] - pb[i]).norm() / pb[i].norm()).item<double>());
  return worst;
}

task all10() { return make_task("all10", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}); }
task footwear() { return make_task("footwear", {0, 0, 0, 0, 0, 1, 0, 1, 0, 1}); }

head_spec head_of(const std::string& name, const task& t, uint64_t run_seed) {
  head_spec h;
  h.name = name;
  h.task_def = t;
  h.model = spec_of("head", derive_seed(run_seed, name), t.classes);
  h.optimizer.lr = 0.02;
  return h;
}

} // namespace

// -- tasks and plans ------------------------------------------------------------

TEST(training, task_maps_labels) {
  auto t = footwear();
  EXPECT_EQ(t.classes, 2);
  auto mapped = apply(t, torch::tensor({5, 0, 9, 7, 8}, torch::kInt64));
  EXPECT_TRUE(torch::equal(mapped, torch::tensor({1, 0, 1, 1, 0}, torch::kInt64)));
  EXPECT_THROW(apply(t, torch::tensor({10}, torch::kInt64)), error);
  EXPECT_THROW(make_task("empty", {}), error);
  EXPECT_THROW(make_task("negative", {0, -1}), error);
}

// The accuracy of a network that answers one class whatever it sees: what
// `baton pretrain` warns a pretrained backbone is no better than (a collapse).
TEST(training, the_most_frequent_class_share_is_counted_on_the_task_s_classes) {
  dataset d;
  d.labels = torch::tensor({5, 0, 9, 7, 8, 1, 2, 3}, torch::kInt64);
  EXPECT_DOUBLE_EQ(most_frequent_share(footwear(), d), 5.0 / 8); // 0, 8, 1, 2, 3: class 0
  EXPECT_DOUBLE_EQ(most_frequent_share(all10(), d), 1.0 / 8);
  EXPECT_DOUBLE_EQ(most_frequent_share(all10(), dataset{}), 0.0);
}

TEST(training, derive_seed_depends_on_base_and_name) {
  EXPECT_EQ(derive_seed(42, "all10"), derive_seed(42, "all10"));
  EXPECT_NE(derive_seed(42, "all10"), derive_seed(42, "all11"));
  EXPECT_NE(derive_seed(42, "all10"), derive_seed(43, "all10"));
}

TEST(training, plan_epoch_cuts_minibatches_into_microbatches) {
  batch_plan plan;
  plan.batch_size = 4;
  plan.microbatches = 3;
  plan.seed = 9;
  auto p = plan_epoch(10, plan, 1);
  // Minibatches of 4, 4, 2 -> parts 2+1+1, 2+1+1, 1+1.
  std::vector<size_t> sizes;
  std::vector<int64_t> joined;
  for (const auto& mb : p.microbatches) {
    sizes.push_back(mb.size());
    joined.insert(joined.end(), mb.begin(), mb.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 1, 1, 2, 1, 1, 1, 1}));
  EXPECT_EQ(p.step_of, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(p.step_size_of, (std::vector<int32_t>{3, 3, 3, 3, 3, 3, 2, 2}));
  EXPECT_EQ(joined, epoch_order(10, 9, 1));
  EXPECT_NE(plan_epoch(10, plan, 2).microbatches, p.microbatches);
  plan.microbatches = 0;
  EXPECT_THROW(plan_epoch(10, plan, 0), error);
}

TEST(training, count_epoch_counts_what_plan_epoch_cuts) {
  batch_plan plan;
  plan.seed = 3;
  for (int64_t batch : {1, 4, 7})
    for (int32_t parts : {1, 3, 8})
      for (int64_t samples : {0, 1, 5, 10, 29}) {
        plan.batch_size = batch;
        plan.microbatches = parts;
        const auto cut = plan_epoch(samples, plan, 0);
        const auto counted = count_epoch(samples, plan);
        EXPECT_EQ(counted.microbatches, static_cast<int64_t>(cut.microbatches.size()));
        EXPECT_EQ(counted.minibatches, cut.step_of.empty() ? 0 : cut.step_of.back() + 1);
      }
  plan.batch_size = 0;
  EXPECT_THROW(count_epoch(10, plan), error);
}

TEST(training, plan_eval_is_the_split_in_order) {
  auto batches = plan_eval(10, 4);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{8, 9}));
  EXPECT_TRUE(plan_eval(0, 4).empty());
}

// -- head_trainer -----------------------------------------------------------------

TEST(training, accumulated_microbatches_equal_one_step_over_the_minibatch) {
  head_trainer split(make_model(spec_of("head", 5)), all10(), optimizer_spec{0.05, 0.9, 1e-4});
  head_trainer whole(make_model(spec_of("head", 5)), all10(), optimizer_spec{0.05, 0.9, 1e-4});
  ASSERT_EQ(weights_digest(split.model()), weights_digest(whole.model()));
  for (int step = 0; step < 3; ++step) { // several steps, so momentum matters
    auto features = randn({16, 256}, 100 + step).relu();
    auto labels = torch::arange(16, torch::kInt64).remainder(10);
    const double first = split.train(features.slice(0, 0, 8), labels.slice(0, 0, 8), 2, false);
    EXPECT_EQ(split.version(), step);
    const double second = split.train(features.slice(0, 8), labels.slice(0, 8), 2, true);
    const double together = whole.train(features, labels, 1, true);
    // Unscaled mean losses: the halves average to the whole.
    EXPECT_NEAR((first + second) / 2, together, 1e-5 * std::abs(together));
    EXPECT_EQ(split.version(), step + 1);
  }
  EXPECT_LT(relative_difference(split.model(), whole.model()), 1e-5);
  EXPECT_GT(relative_difference(split.model(), make_model(spec_of("head", 5))), 1e-3);
}

TEST(training, correct_counts_argmax_hits_without_gradient) {
  head_trainer trainer(make_model(spec_of("head", 1, 4)), make_task("four", {0, 1, 2, 3}),
                       optimizer_spec{});
  auto features = randn({32, 256}, 3);
  auto labels = torch::arange(32, torch::kInt64).remainder(4);
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = trainer.model().forward(features).argmax(1).eq(labels).sum();
  }
  EXPECT_EQ(trainer.correct(features, labels), expected.item<int64_t>());
  for (const auto& p : trainer.model().parameters())
    EXPECT_FALSE(p.grad().defined());
}

TEST(training, forward_frozen_keeps_no_graph) {
  auto m = make_model(spec_of("head", 1));
  auto y = forward_frozen(m, randn({2, 256}, 1));
  EXPECT_FALSE(y.requires_grad());
}

// -- the local transfer run (DESIGN invariant 3 at the model level) -----------------

TEST(training, two_heads_in_one_run_equal_two_single_head_runs) {
  auto backbone = make_model(spec_of("convnet", 3));
  auto train = make_synthetic(160, 1, 28, 28, 10, 1);
  auto test = make_synthetic(64, 1, 28, 28, 10, 2);
  batch_plan plan;
  plan.batch_size = 8;
  plan.microbatches = 2;
  plan.epochs = 2;
  const auto a = head_of("a", all10(), 42), b = head_of("b", footwear(), 42);
  std::map<std::string, int> reports;
  auto both = run_transfer_local(backbone, {a, b}, train, test, plan,
                                 [&](const std::string& head, int32_t, int64_t, double loss) {
                                   EXPECT_TRUE(std::isfinite(loss));
                                   ++reports[head];
                                 });
  auto only_a = run_transfer_local(backbone, {a}, train, test, plan);
  auto only_b = run_transfer_local(backbone, {b}, train, test, plan);
  ASSERT_EQ(both.size(), 2u);
  const std::vector<std::pair<head_result, head_result>> pairs{{both[0], only_a[0]},
                                                               {both[1], only_b[0]}};
  for (const auto& [together, alone] : pairs) {
    EXPECT_EQ(together.weights_digest, alone.weights_digest) << together.name;
    EXPECT_EQ(together.train_loss, alone.train_loss) << together.name;
    EXPECT_EQ(together.test_accuracy, alone.test_accuracy) << together.name;
    EXPECT_EQ(together.samples, 320);
    EXPECT_EQ(together.train_loss.size(), 2u);
    ASSERT_EQ(together.test_accuracy.size(), 2u);
    EXPECT_TRUE(together.test_accuracy[1] >= 0 && together.test_accuracy[1] <= 1);
    EXPECT_LT(together.train_loss[1], together.train_loss[0]) << together.name;
  }
  EXPECT_EQ(both[0].task, "all10");
  EXPECT_NE(both[0].weights_digest, weights_digest(make_model(a.model)));
  // 20 steps per epoch: one report per head per epoch.
  EXPECT_EQ(reports, (std::map<std::string, int>{{"a", 2}, {"b", 2}}));
}

TEST(training, head_with_too_few_outputs_is_an_error) {
  auto h = head_of("a", all10(), 1);
  h.model.classes = 2;
  EXPECT_THROW(run_transfer_local(make_model(spec_of("convnet", 1)), {h},
                                  make_synthetic(8, 1, 28, 28, 10, 1),
                                  make_synthetic(8, 1, 28, 28, 10, 2), batch_plan{}),
               error);
}

// -- pre-training -----------------------------------------------------------------------

TEST(training, pretrain_writes_a_checkpoint_the_backbone_loads) {
  scratch_dir scratch{"pretrain"};
  const fs::path dir = scratch.path();
  pretraining_settings spec;
  spec.backbone = spec_of("convnet", 11);
  spec.task_def = all10();
  spec.optimizer = optimizer_spec{0.05, 0.9, 0};
  spec.plan.batch_size = 32;
  spec.plan.microbatches = 2;
  spec.plan.epochs = 1;
  spec.out_path = (dir / "ckpt/convnet.pt").string();
  // 32 steps: enough to leave chance (0.1) behind, not to converge.
  auto train = load_fashion_mnist(default_fashion_mnist_dir, split::train, 1024);
  auto test = load_fashion_mnist(default_fashion_mnist_dir, split::test, 512);
  const double accuracy = pretrain(spec, train, test);
  EXPECT_GT(accuracy, 0.15); // > 4 standard errors above chance on 512 samples

  auto backbone = make_model(spec.backbone);
  const std::string fresh = weights_digest(backbone);
  load_checkpoint(backbone, spec.out_path); // a backbone loads from the larger model
  EXPECT_NE(weights_digest(backbone), fresh);

  // The whole pretrained model reloaded gives the reported accuracy exactly.
  auto whole = make_pretrain_model(spec.backbone, 10);
  EXPECT_EQ(whole.layer_names().back(), "fc2");
  load_checkpoint(whole, spec.out_path);
  head_trainer evaluator(whole, all10(), optimizer_spec{});
  int64_t correct = 0;
  for (const auto& ids : plan_eval(test.size(), 32)) {
    auto [images, labels] = gather(test, ids);
    correct += evaluator.correct(images, labels);
  }
  EXPECT_DOUBLE_EQ(static_cast<double>(correct) / 512.0, accuracy);
}
