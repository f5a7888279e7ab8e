#include "model/core/freezing.hpp"

#include <cmath>
#include <limits>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/data_parallel/data_parallel.hpp"
#include "model/core/error.hpp"
#include "tests/support/tiny_model.hpp"

using namespace baton::model;
using baton::model::testing::batch_only_bn_model;
using baton::model::testing::bn_model;

namespace {

adaptive_freeze_options every_step(double percentile = 50, int32_t max_frozen = -1) {
  adaptive_freeze_options o;
  o.interval = 1;
  o.percentile = percentile;
  o.max_frozen = max_frozen;
  return o;
}

} // namespace

TEST(freezing, percentile_interpolates_as_numpy) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 50), 7);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(percentile({1, inf, inf}, 75), inf);
}

// Recorded norms -> the layer the rule says. Rates after the second interval:
// g1 0.01, g2 0.05, g3 0.5, g4 0; their median is 0.03: g1 is below it, g2
// is not, so the prefix up to g1 freezes (g4's low rate does not count: it
// is not leading).
TEST(freezing, rule_freezes_the_leading_groups_below_the_percentile) {
  adaptive_freezer f({"g1", "g2", "g3", "g4"}, every_step());
  EXPECT_FALSE(f.decide(0, {10, 10, 10, 10}).has_value());
  auto d = f.decide(1, {9.9, 9.5, 5, 10});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->step, 1);
  EXPECT_EQ(d->frozen_before, 0);
  EXPECT_EQ(d->frozen_after, 1);
  EXPECT_EQ(d->layer, "g1");
  ASSERT_EQ(d->rates.size(), 4u);
  EXPECT_NEAR(d->rates[0], 0.01, 1e-12);
  EXPECT_NEAR(d->rates[2], 0.5, 1e-12);
  EXPECT_NEAR(d->threshold, 0.03, 1e-12);
  // Next: rates of g2..g4 only: 0.001 (9.5 -> 9.4905), 0.2 (5 -> 4), 0.1
  // (10 -> 9); median 0.1: g2 freezes, g3 stops it.
  d = f.decide(2, {123, 9.4905, 4, 9});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rates.size(), 3u);
  EXPECT_NEAR(d->threshold, 0.1, 1e-9);
  EXPECT_EQ(d->frozen_after, 2);
  EXPECT_EQ(d->layer, "g2");
  // It never unfreezes, whatever the norms of frozen groups do.
  d = f.decide(3, {0, 0, 400, 9});
  EXPECT_EQ(d->frozen_after, 2);
  EXPECT_EQ(f.frozen(), 2);
}

// A freezer restored from a checkpoint decides as the one that ran on.
TEST(freezing, a_restored_freezer_continues_the_same_decisions) {
  adaptive_freezer f({"g1", "g2", "g3", "g4"}, every_step());
  f.decide(0, {10, 10, 10, 10});
  f.decide(1, {9.9, 9.5, 5, 10});
  adaptive_freezer g({"g1", "g2", "g3", "g4"}, every_step());
  g.restore(f.save());
  const auto a = f.decide(2, {123, 9.4905, 4, 9});
  const auto b = g.decide(2, {123, 9.4905, 4, 9});
  EXPECT_EQ(a->frozen_after, b->frozen_after);
  EXPECT_EQ(a->rates, b->rates);
  EXPECT_THROW(g.restore({1, {1, 2}}), error);
  EXPECT_THROW(g.restore({5, {}}), error);
  EXPECT_EQ(g.frozen(), 2);
}

TEST(freezing, max_frozen_bounds_the_prefix) {
  adaptive_freezer f({"g1", "g2", "g3"}, every_step(100, 1));
  f.decide(0, {1, 1, 1});
  const auto d = f.decide(1, {1, 1, 2}); // rates 0, 0, 1: both leading below 1
  EXPECT_EQ(d->frozen_after, 1);
  EXPECT_EQ(f.decide(2, {1, 1, 1})->frozen_after, 1);
}

TEST(freezing, a_group_without_gradient_before_is_not_frozen_on_a_jump) {
  adaptive_freezer f({"g1", "g2"}, every_step());
  f.decide(0, {0, 1});
  const auto d = f.decide(1, {5, 1});
  EXPECT_TRUE(std::isinf(d->rates[0]));
  EXPECT_EQ(d->frozen_after, 0);
}

TEST(freezing, decisions_are_due_every_interval_and_checked) {
  adaptive_freeze_options o;
  o.interval = 3;
  adaptive_freezer f({"a", "b"}, o);
  EXPECT_FALSE(f.due(0));
  EXPECT_TRUE(f.due(2));
  EXPECT_TRUE(f.due(5));
  EXPECT_THROW(f.decide(2, {1}), error);
  EXPECT_THROW(adaptive_freezer({}, o), error);
  EXPECT_THROW(adaptive_freezer({"a"}, every_step(101)), error);
  EXPECT_THROW(adaptive_freezer({"a"}, every_step(50, 2)), error);
}

TEST(freezing, interval_gradients_give_l1_norms_of_the_sums_per_group) {
  const auto m = bn_model();
  const auto groups = parameter_groups(m, {"bn1", "relu2"});
  // fc1.w fc1.b bn1.w bn1.b | fc2.w fc2.b | fc3.w fc3.b
  EXPECT_EQ(groups, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, -1, -1}));
  interval_gradients acc(groups, 2);
  std::vector<at::Tensor> g;
  for (const auto& p : m.parameters())
    g.push_back(torch::ones_like(p));
  std::vector<at::Tensor> h;
  for (const auto& p : m.parameters())
    h.push_back(-3 * torch::ones_like(p));
  acc.add(g);
  acc.add(h); // sums are -2 everywhere
  const auto norms = acc.l1_norms();
  EXPECT_DOUBLE_EQ(norms[0], 2.0 * (784 * 32 + 32 + 32 + 32));
  EXPECT_DOUBLE_EQ(norms[1], 2.0 * (32 * 24 + 24));
  acc.reset();
  EXPECT_DOUBLE_EQ(acc.l1_norms()[1], 0);
  EXPECT_THROW(parameter_groups(m, {"relu2", "fc1"}), error);
}

TEST(freezing, freeze_point_makes_the_prefix_forward_only) {
  const auto m = bn_model();
  EXPECT_EQ(freeze_point(m, ""), 0u);
  EXPECT_EQ(freeze_point(m, "relu1"), 4u);
  EXPECT_THROW(freeze_point(m, "fc9"), error);
  apply_freeze_point(m, 4);
  for (const auto& [name, p] : m.named_parameters())
    EXPECT_EQ(p.requires_grad(), name.rfind("fc1", 0) != 0 && name.rfind("bn1", 0) != 0) << name;
  EXPECT_FALSE(m.layers()[2].module.ptr()->is_training());
  EXPECT_TRUE(m.layers()[4].module.ptr()->is_training());
}

TEST(freezing, batch_norm_without_statistics_depends_on_the_batch) {
  EXPECT_TRUE(batch_dependent_layers(bn_model()).empty());
  EXPECT_EQ(batch_dependent_layers(batch_only_bn_model()), (std::vector<std::string>{"bn1"}));
  EXPECT_TRUE(batch_dependent_layers(batch_only_bn_model().slice(0, 2)).empty());
}

// The rule inside the reference: a decision at the end of every interval
// but the first, taken on the reduced gradient, the freeze point only grows
// and is what the rule says of the rates it logged.
TEST(freezing, adaptive_freezing_in_the_local_reference) {
  data_parallel_settings spec;
  spec.workers = 2;
  spec.batch_size = 8;
  spec.epochs = 3;
  spec.optimizer = {0.05, 0.9, 0};
  spec.freeze_groups = {"bn1", "relu2"};
  spec.adaptive.interval = 2;
  spec.adaptive.percentile = 50;
  const dataset train = make_synthetic(64, 1, 28, 28, 10, 3);
  const dataset test = make_synthetic(16, 1, 28, 28, 10, 4);
  const auto result = run_data_parallel_local(bn_model, train, test, spec);
  EXPECT_EQ(result.steps, 12);
  ASSERT_EQ(result.decisions.size(), 5u); // intervals end at steps 1, 3, ..., 11; first records
  int32_t frozen = 0;
  for (size_t i = 0; i < result.decisions.size(); ++i) {
    const auto& d = result.decisions[i];
    EXPECT_EQ(d.step, 3 + 2 * static_cast<int64_t>(i));
    EXPECT_EQ(d.frozen_before, frozen);
    int32_t leading = 0;
    while (leading < static_cast<int32_t>(d.rates.size()) && d.rates[leading] < d.threshold)
      ++leading;
    EXPECT_EQ(d.frozen_after, d.frozen_before + leading);
    frozen = d.frozen_after;
  }
  const size_t points[] = {0, 3, 6}; // after bn1, after relu2
  EXPECT_EQ(result.frozen_layers, points[frozen]);
  EXPECT_GT(frozen, 0); // on this data the first group's rate falls below the median
}

// -- tied weights (DESIGN invariant 14) -------------------------------------------

// Freezing a layer freezes its parameters wherever else they are used: fc2
// frozen, its weight stays frozen in the trainable fc2b (whose own bias trains).
TEST(freezing, a_frozen_layer_freezes_its_tensor_in_the_later_layer_tied_to_it) {
  const auto m = baton::model::testing::tied_model();
  apply_freeze_point(m, static_cast<size_t>(m.index_of("fc2")) + 1);
  const auto& fc2b = *m.layers()[m.index_of("fc2b")].module.ptr();
  EXPECT_FALSE(fc2b.named_parameters()["weight"].requires_grad());
  EXPECT_TRUE(fc2b.named_parameters()["bias"].requires_grad());
  // One group per parameter, the tied one in its first layer's group.
  const auto groups = parameter_groups(m, {"fc2", "fc3"});
  EXPECT_EQ(groups, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1}));
}
