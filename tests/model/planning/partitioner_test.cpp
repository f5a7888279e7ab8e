#include "model/planning/partitioner.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/core/error.hpp"

using baton::model::evaluate_partition;
using baton::model::feasible;
using baton::model::layer_cost;
using baton::model::partition_options;
using baton::model::partition_plan;
using baton::model::plan_partition;

namespace {

constexpr double unlimited = std::numeric_limits<double>::infinity();

/// Random layer costs: some layers without parameters (activations, pools),
/// times and sizes over a few orders of magnitude so that compute, weight
/// sync and activation transfer each dominate in some instances.
std::vector<layer_cost> random_layers(std::mt19937_64& rng, size_t count) {
  std::uniform_real_distribution<double> seconds(1e-4, 1e-2);
  std::uniform_int_distribution<int64_t> bytes(1000, 20'000'000);
  std::bernoulli_distribution has_parameters(0.6);
  std::vector<layer_cost> layers;
  for (size_t k = 0; k < count; ++k)
    layers.push_back({"layer" + std::to_string(k), seconds(rng), seconds(rng), bytes(rng),
                      has_parameters(rng) ? bytes(rng) : 0});
  return layers;
}

/// Every contiguous partition into stages and every replica assignment with at
/// most `machines` machines in all (1 per stage when straight): the best
/// feasible slowest-stage time, or infinity.
double brute_force(const std::vector<layer_cost>& layers, const partition_options& options) {
  double best = unlimited;
  std::vector<std::pair<size_t, int32_t>> stages;
  std::function<void(size_t, int32_t)> extend = [&](size_t begin, int32_t machines_left) {
    if (begin == layers.size()) {
      auto plan = evaluate_partition(layers, stages, options.bandwidth);
      if (feasible(plan, options))
        best = std::min(best, plan.slowest_seconds);
      return;
    }
    const int32_t max_replicas = options.straight ? 1 : machines_left;
    for (size_t end = begin + 1; end <= layers.size(); ++end)
      for (int32_t r = 1; r <= std::min(max_replicas, machines_left); ++r) {
        stages.emplace_back(end, r);
        extend(end, machines_left - r);
        stages.pop_back();
      }
  };
  extend(0, options.machines);
  return best;
}

/// The plan covers every layer once, in order, and fits the options.
void expect_well_formed(const partition_plan& plan, const std::vector<layer_cost>& layers,
                        const partition_options& options) {
  ASSERT_FALSE(plan.stages.empty());
  size_t begin = 0;
  for (const auto& s : plan.stages) {
    EXPECT_EQ(s.begin, begin);
    EXPECT_LT(s.begin, s.end);
    EXPECT_GE(s.replicas, 1);
    begin = s.end;
  }
  EXPECT_EQ(begin, layers.size());
  EXPECT_TRUE(feasible(plan, options)) << plan.notation();
}

} // namespace

TEST(partitioner_test, dynamic_program_equals_brute_force) {
  std::mt19937_64 rng(20261121);
  int solved = 0, infeasible = 0;
  for (int instance = 0; instance < 400; ++instance) {
    const size_t layer_count = 1 + rng() % 7;
    auto layers = random_layers(rng, layer_count);
    partition_options options;
    options.machines = 1 + static_cast<int32_t>(rng() % 5);
    options.bandwidth = std::pow(10.0, 7 + static_cast<double>(rng() % 30) / 10); // 1e7..1e10
    options.straight = rng() % 3 == 0;
    if (rng() % 2 == 0) {
      // A limit between the smallest single layer and the whole model with
      // every stage's worth in flight: some instances fit, some do not.
      double total = 0;
      for (const auto& l : layers)
        total += static_cast<double>(l.parameter_bytes + l.activation_bytes);
      options.memory = std::uniform_real_distribution<double>(0.05, 2.0)(rng) * total;
    }
    const double expected = brute_force(layers, options);
    SCOPED_TRACE("instance " + std::to_string(instance) + ": " + std::to_string(layer_count) +
                 " layers, " + std::to_string(options.machines) + " machines, straight " +
                 std::to_string(options.straight) + ", memory " + std::to_string(options.memory));
    if (expected == unlimited) {
      EXPECT_THROW(plan_partition(layers, options), baton::model::error);
      ++infeasible;
      continue;
    }
    auto plan = plan_partition(layers, options);
    expect_well_formed(plan, layers, options);
    EXPECT_NEAR(plan.slowest_seconds, expected, 1e-12 * std::max(1.0, expected));
    ++solved;
  }
  // Both kinds of instance were exercised.
  EXPECT_GT(solved, 200);
  EXPECT_GT(infeasible, 10);
}

TEST(partitioner_test, one_machine_is_one_stage_with_all_layers) {
  std::mt19937_64 rng(1);
  auto layers = random_layers(rng, 6);
  partition_options options;
  options.machines = 1;
  auto plan = plan_partition(layers, options);
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.notation(), "1");
  double compute = 0;
  for (const auto& l : layers)
    compute += l.forward_seconds + l.backward_seconds;
  EXPECT_NEAR(plan.slowest_seconds, compute, 1e-15);
  EXPECT_EQ(plan.stages[0].weight_sync_seconds, 0.0);
  EXPECT_EQ(plan.stages[0].output_seconds, 0.0);
}

TEST(partitioner_test, one_layer_without_parameters_is_replicated_on_every_machine) {
  std::vector<layer_cost> layers{{"relu", 0.004, 0.004, 1000, 0}};
  partition_options options;
  options.machines = 4;
  auto plan = plan_partition(layers, options);
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.notation(), "4");
  EXPECT_NEAR(plan.slowest_seconds, 0.002, 1e-15);
  options.straight = true;
  EXPECT_EQ(plan_partition(layers, options).notation(), "1");
}

TEST(partitioner_test, more_machines_than_layers) {
  // Three equal layers, no parameters, cheap links: 8 machines are best used
  // as replicas, never as more stages than layers.
  std::vector<layer_cost> layers{{"a", 0.01, 0.01, 10, 0}, {"b", 0.01, 0.01, 10, 0},
                                 {"c", 0.01, 0.01, 10, 0}};
  partition_options options;
  options.machines = 8;
  auto plan = plan_partition(layers, options);
  expect_well_formed(plan, layers, options);
  EXPECT_LE(plan.stages.size(), 3u);
  EXPECT_LE(plan.machines_used(), 8);
  EXPECT_NEAR(plan.slowest_seconds, 0.06 / 8, 1e-12);
  options.straight = true;
  auto straight = plan_partition(layers, options);
  EXPECT_EQ(straight.notation(), "1-1-1");
  EXPECT_NEAR(straight.slowest_seconds, 0.02, 1e-12);
}

TEST(partitioner_test, weight_sync_keeps_heavy_layers_unreplicated) {
  // A cheap layer with huge parameters next to an expensive one without: the
  // expensive one is replicated, the heavy one is not (its all-reduce would
  // cost more than its compute saves).
  std::vector<layer_cost> layers{{"conv", 0.02, 0.02, 1'000, 0},
                                 {"fc", 0.001, 0.001, 1'000, 400'000'000}};
  partition_options options;
  options.machines = 3;
  auto plan = plan_partition(layers, options);
  EXPECT_EQ(plan.notation(), "2-1");
  EXPECT_NEAR(plan.slowest_seconds, 0.02, 1e-12);
}

TEST(partitioner_test, memory_counts_one_version_per_microbatch_in_flight) {
  // Two layers of 100 bytes each (parameters + activations). In two stages
  // the first holds 2 versions (200 bytes), the last 1 (100 bytes); as one
  // stage it holds 200 bytes once.
  std::vector<layer_cost> layers{{"a", 0.01, 0.01, 50, 50}, {"b", 0.01, 0.01, 50, 50}};
  partition_options options;
  options.machines = 2;
  options.straight = true;
  options.bandwidth = 1e12;
  auto plan = plan_partition(layers, options);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].in_flight, 2);
  EXPECT_EQ(plan.stages[0].memory_bytes, 200.0);
  EXPECT_EQ(plan.stages[1].in_flight, 1);
  EXPECT_EQ(plan.stages[1].memory_bytes, 100.0);
  options.memory = 199; // the two-stage plan no longer fits, nor does one stage
  EXPECT_THROW(plan_partition(layers, options), baton::model::error);
  options.memory = 200;
  EXPECT_EQ(plan_partition(layers, options).stages.size(), 2u);
}

TEST(partitioner_test, infeasible_and_invalid_inputs_are_errors) {
  std::vector<layer_cost> layers{{"fc", 0.01, 0.01, 1'000, 1'000'000}};
  partition_options options;
  options.machines = 4;
  options.memory = 1'000'000; // the layer alone needs 1,001,000 bytes
  try {
    plan_partition(layers, options);
    FAIL() << "expected an error";
  } catch (const baton::model::error& e) {
    EXPECT_NE(std::string(e.what()).find("'fc' alone needs 1001000 bytes"), std::string::npos)
      << e.what();
  }
  EXPECT_THROW(plan_partition({}, partition_options{}), baton::model::error);
  options = partition_options{};
  options.machines = 0;
  EXPECT_THROW(plan_partition(layers, options), baton::model::error);
  options.machines = 1;
  options.bandwidth = 0;
  EXPECT_THROW(plan_partition(layers, options), baton::model::error);
}

TEST(partitioner_test, plans_120_layers_on_16_machines) {
  std::mt19937_64 rng(7);
  auto layers = random_layers(rng, 120);
  for (bool straight : {false, true}) {
    partition_options options;
    options.machines = 16;
    options.straight = straight;
    options.memory = 1e9;
    auto started = std::chrono::steady_clock::now();
    auto plan = plan_partition(layers, options);
    const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("120 layers, 16 machines%s: %s, slowest stage %.6f s, planned in %.3f s\n",
                straight ? " (straight)" : "", plan.notation().c_str(), plan.slowest_seconds,
                seconds);
    expect_well_formed(plan, layers, options);
  }
}

// Layers that share a parameter (tied weights) are never cut apart: four equal
// layers on four machines would be four stages; with layers 1..3 joined (1 and
// 3 share a tensor) they are two, [0] and [1..3].
TEST(partitioner, never_cuts_between_layers_that_share_a_parameter) {
  std::vector<layer_cost> layers;
  for (int k = 0; k < 4; ++k)
    layers.push_back({"layer" + std::to_string(k), 1e-3, 1e-3, 1000, 1000});
  partition_options options;
  options.machines = 4;
  options.straight = true;
  options.bandwidth = unlimited;
  ASSERT_EQ(plan_partition(layers, options).stages.size(), 4u);
  options.joined = {false, false, true, true};
  const auto plan = plan_partition(layers, options);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].end, 1u);
  EXPECT_EQ(plan.stages[1].end, 4u);
}

// weight_gradient: next: a stage ending in a layer whose weight gradient the
// next stage can compute hands it on when that lowers the slower of the
// two (the convnet's split after conv3: 15.6 / 13.5 ms became 14.3 / 14.8),
// not when it would make the next stage the slower one, nor over a link
// too slow for the layer's input, nor for frozen (forward-only) stages.
TEST(partitioner_test, a_weight_gradient_moves_to_the_next_stage_where_it_balances_them) {
  // 4 ms | conv (4 ms, 1.2 ms of it its weight gradient) | 6.5 ms
  std::vector<layer_cost> layers{{"a", 1e-3, 3e-3, 1000, 0},
                                 {"conv", 1e-3, 3e-3, 1000, 4000, 0, 1.2e-3},
                                 {"b", 2e-3, 4.5e-3, 10, 0}};
  partition_options options;
  options.machines = 2;
  options.straight = true;
  EXPECT_FALSE(plan_partition(layers, options).stages[0].weight_gradient_next); // not asked
  options.hand_on_weight_gradients = true;
  auto plan = plan_partition(layers, options);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].end, 2u);
  EXPECT_TRUE(plan.stages[0].weight_gradient_next);
  EXPECT_NEAR(plan.stages[0].compute_seconds, 6.8e-3, 1e-12);
  EXPECT_NEAR(plan.stages[1].compute_seconds, 7.7e-3, 1e-12);
  EXPECT_NEAR(plan.slowest_seconds, 7.7e-3, 1e-12);

  auto heavy_next = layers;
  heavy_next[2].backward_seconds = 6e-3; // 8 ms: moving 1.2 ms would make it the slower
  EXPECT_FALSE(plan_partition(heavy_next, options).stages[0].weight_gradient_next);

  options.bandwidth = 1e5; // the conv's input, 1000 bytes, takes 10 ms
  EXPECT_FALSE(plan_partition(layers, options).stages[0].weight_gradient_next);

  options.bandwidth = 1e9;
  options.forward_only = true;
  for (const auto& s : plan_partition(layers, options).stages)
    EXPECT_FALSE(s.weight_gradient_next);
}
