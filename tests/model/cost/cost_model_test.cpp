#include "model/cost/cost_model.hpp"

#include <limits>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "model/core/error.hpp"
#include "model/cost/projection.hpp"

using namespace baton::model::cost;

namespace {

constexpr double tolerance = 1e-9;

/// Two layers, profiled at one sample, where every figure is easy to add up:
///   layer  forward  backward  update  activation  parameters
///   a      1 s      2 s       0.5 s   100 B       1000 B
///   b      2 s      3 s       0.5 s    50 B       2000 B
/// One sample's step: forward 3 + backward 5 + update 1 = 9 s; 3000 B of gradients.
workload tiny(int64_t batch_size = 1) {
  workload w;
  w.layers = {{"a", 1, 2, 0.5, 100, 1000}, {"b", 2, 3, 0.5, 50, 2000}};
  w.profiled_batch = 1;
  w.batch_size = batch_size;
  return w;
}

/// 1000 B/s, no latency or overhead unless a test sets them.
cluster hosts(int32_t count, double bandwidth = 1000, double latency = 0, double overhead = 0) {
  return cluster{count, link_model{bandwidth, latency, overhead}};
}

/// A bucket cap in MiB that holds `bytes`.
double cap_of(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

void expect_split(const prediction& p, double compute, double communication, double waiting) {
  EXPECT_NEAR(p.compute_seconds, compute, tolerance) << p.strategy;
  EXPECT_NEAR(p.communication_seconds, communication, tolerance) << p.strategy;
  EXPECT_NEAR(p.waiting_seconds, waiting, tolerance) << p.strategy;
  EXPECT_NEAR(p.step_seconds, compute + communication + waiting, tolerance) << p.strategy;
}

/// A random profile of `count` layers (some without parameters), sizes and
/// times over a few orders of magnitude.
workload random_workload(std::mt19937_64& rng, size_t count) {
  std::uniform_real_distribution<double> seconds(1e-4, 1e-2), bytes(1e3, 1e7);
  workload w;
  for (size_t k = 0; k < count; ++k)
    w.layers.push_back({"l" + std::to_string(k), seconds(rng), seconds(rng),
                        k % 3 == 1 ? 0.0 : seconds(rng) / 10, bytes(rng),
                        k % 3 == 1 ? 0.0 : bytes(rng)});
  w.profiled_batch = 16;
  w.batch_size = 32;
  w.samples_per_epoch = 6400;
  return w;
}

/// One of every strategy, as the projection tests sweep them.
std::vector<strategy> every_strategy() {
  pipeline_strategy gpipe;
  gpipe.microbatches = 4;
  gpipe.schedule = pipeline_schedule::gpipe;
  pipeline_strategy one_f_one_b;
  one_f_one_b.microbatches = 4;
  return {local_strategy{},       ring_strategy{freezing{}, cap_of(2e7), true},
          ps_strategy{{}, 2},     local_sgd_strategy{{}, 4, 25},
          gpipe,                  one_f_one_b,
          ist_strategy{0, 5, 0}};
}

} // namespace

// -- local -------------------------------------------------------------------------------

TEST(cost_model, local_is_forward_backward_and_update) {
  const prediction p = predict(tiny(), hosts(1), local_strategy{});
  EXPECT_EQ(p.strategy, "local");
  expect_split(p, 9, 0, 0);
  EXPECT_EQ(p.samples_per_step, 1);
  EXPECT_EQ(p.wire_bytes, 0);
  EXPECT_NEAR(p.samples_per_second(), 1.0 / 9, tolerance);
}

TEST(cost_model, compute_scales_with_the_batch_but_the_update_does_not) {
  // Two samples: forward 6 + backward 10 + update 1 = 17 s.
  expect_split(predict(tiny(2), hosts(1), local_strategy{}), 17, 0, 0);
}

// W workers computed `lanes` at a time: a step is ceil(W / lanes) workers'
// batches in turn, and trains W batches.
TEST(cost_model, local_computes_its_workers_lanes_at_a_time) {
  const prediction two_lanes = predict(tiny(), hosts(1), local_strategy{{}, 2, 2});
  expect_split(two_lanes, 9, 0, 0); // one batch's time
  EXPECT_EQ(two_lanes.samples_per_step, 2);
  expect_split(predict(tiny(), hosts(1), local_strategy{{}, 2, 1}), 17, 0, 0); // two in turn
  expect_split(predict(tiny(), hosts(1), local_strategy{{}, 3, 2}), 17, 0, 0);
  EXPECT_EQ(predict(tiny(), hosts(1), local_strategy{{}, 3, 2}).samples_per_step, 3);
  EXPECT_THROW(predict(tiny(), hosts(1), local_strategy{{}, 2, 0}), baton::model::error);
}

// The loop's step timed whole takes the place of the layers' sum.
TEST(cost_model, local_takes_its_loop_s_timed_step) {
  expect_split(predict(tiny(), hosts(1), local_strategy{{}, 3, 2, 0.25}), 0.25, 0, 0);
}

TEST(cost_model, epoch_is_steps_times_step) {
  workload w = tiny();
  w.samples_per_epoch = 10;
  const prediction p = predict(w, hosts(1), local_strategy{});
  EXPECT_EQ(p.steps_per_epoch, 10);
  EXPECT_NEAR(p.epoch_seconds(), 90, tolerance);
  EXPECT_NEAR(p.seconds_for_epochs(2.5), 225, tolerance);
}

// -- freezing ----------------------------------------------------------------------------

TEST(cost_model, a_frozen_prefix_runs_forward_only_and_the_cache_drops_its_forward) {
  // Layer a frozen: forward 1 + 2, backward 3, update 0.5 = 6.5 s; cached: 5.5 s.
  expect_split(predict(tiny(), hosts(1), local_strategy{{1, false}}), 6.5, 0, 0);
  expect_split(predict(tiny(), hosts(1), local_strategy{{1, true}}), 5.5, 0, 0);
}

TEST(cost_model, a_frozen_prefix_puts_no_bytes_on_the_ring) {
  // W = 2, one bucket of layer b's 2000 B, ready at forward 3 + backward 3 = 6 s (the
  // backward's end); the ring sends 2 rounds of 1000 B chunks at 1000 B/s = 2 s.
  const prediction p =
    predict(tiny(), hosts(2), ring_strategy{{1, false}, cap_of(1e9), true});
  expect_split(p, 6.5, 2, 0);
  EXPECT_NEAR(p.wire_bytes, 4000, tolerance); // 2 (W - 1) x 2000
}

// -- data-parallel: ring -----------------------------------------------------------------

TEST(cost_model, ring_of_one_host_is_local) {
  const prediction local = predict(tiny(), hosts(1), local_strategy{});
  const prediction ring = predict(tiny(), hosts(1), ring_strategy{});
  EXPECT_NEAR(ring.step_seconds, local.step_seconds, tolerance);
  EXPECT_NEAR(ring.compute_seconds, local.compute_seconds, tolerance);
  EXPECT_EQ(ring.communication_seconds, 0);
  EXPECT_EQ(ring.wire_bytes, 0);
}

TEST(cost_model, ring_of_one_bucket_waits_for_the_whole_backward) {
  // W = 2: one 3000 B bucket, ready at 8 s; 2 rounds of 1500 B chunks = 3 s; step 9 + 3.
  const prediction p = predict(tiny(), hosts(2), ring_strategy{});
  EXPECT_EQ(p.strategy, "data-parallel:ring");
  expect_split(p, 9, 3, 0);
  EXPECT_EQ(p.samples_per_step, 2);
  EXPECT_NEAR(p.wire_bytes, 6000, tolerance);
}

TEST(cost_model, ring_buckets_overlap_the_backward) {
  // Buckets of >= 1000 B: {b: 2000 B} ready at forward 3 + b's backward 3 = 6 s, on the
  // ring 2 x 1000 B / 1000 B/s = 2 s -> 8 s; {a: 1000 B} ready at 8 s, 2 x 500 B = 1 s
  // -> 9 s. The backward ends at 8 s: 1 s exposed, step 9 + 1.
  expect_split(predict(tiny(), hosts(2), ring_strategy{{}, cap_of(1000), true}), 9, 1, 0);
  // Without overlap both buckets go after the backward: 2 + 1 = 3 s exposed.
  expect_split(predict(tiny(), hosts(2), ring_strategy{{}, cap_of(1000), false}), 9, 3, 0);
}

TEST(cost_model, ring_pays_latency_and_overhead_per_chunk) {
  // W = 3, one 3000 B bucket: 2 (W - 1) = 4 rounds of 0.1 + 0.05 + 1000 B / 1000 B/s = 4.6 s.
  const prediction p = predict(tiny(), hosts(3, 1000, 0.1, 0.05), ring_strategy{});
  expect_split(p, 9, 4.6, 0);
  EXPECT_NEAR(p.wire_bytes, 12000, tolerance); // 2 (W - 1) x 3000
  EXPECT_EQ(p.samples_per_step, 3);
}

TEST(cost_model, buckets_are_cut_in_backward_order) {
  const auto buckets = gradient_buckets(tiny().layers, 0, cap_of(1000));
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].bytes, 2000);
  EXPECT_EQ(buckets[0].first_layer, 1u);
  EXPECT_EQ(buckets[1].bytes, 1000);
  EXPECT_EQ(buckets[1].first_layer, 0u);
  EXPECT_EQ(gradient_buckets(tiny().layers, 0, 25).size(), 1u);
  EXPECT_EQ(ring_allreduce_seconds(3000, 1, link_model{}), 0);
}

// -- data-parallel: parameter server -------------------------------------------------------

TEST(cost_model, ps_pushes_and_pulls_every_shard_slice) {
  // W = 2, S = 2 (one shard per host): each host sends 1500 B of its gradient to the other
  // host's shard and receives 1500 B for its own: 1.5 s each way, push + pull = 3 s.
  // Compute: forward 3 + backward 5 + each host's shard steps half the update, 0.5.
  const prediction p = predict(tiny(), hosts(2), ps_strategy{{}, 2});
  EXPECT_EQ(p.strategy, "data-parallel:ps");
  expect_split(p, 8.5, 3, 0);
  EXPECT_NEAR(p.wire_bytes, 6000, tolerance);
}

TEST(cost_model, ps_with_one_shard_is_bound_by_its_host) {
  // W = 2, S = 1 on host 0: host 1 sends its whole 3000 B gradient, host 0's shard takes
  // it in: 3 s a phase, 6 s both. The shard steps the whole model: 8 + 1 = 9 s compute.
  expect_split(predict(tiny(), hosts(2), ps_strategy{{}, 1}), 9, 6, 0);
}

TEST(cost_model, ps_counts_messages_and_latency_at_the_busiest_host) {
  // W = 3, S = 2 (hosts 0 and 1 hold a shard, host 2 none), latency 0.1, overhead 0.01.
  // Host 0: sends 1500 B (1 message), its shard receives 2 x 1500 B (2 messages):
  // 2 x 0.01 + 3000 / 1000 = 3.02 s. Host 2: sends 2 x 1500 B, 2 messages: 3.02 s.
  // A phase 0.1 + 3.02 = 3.12 s, push + pull 6.24 s; compute 8 + 0.5.
  expect_split(predict(tiny(), hosts(3, 1000, 0.1, 0.01), ps_strategy{{}, 2}), 8.5, 6.24, 0);
}

TEST(cost_model, ps_messages_are_counted_per_shard_not_on_the_same_host) {
  // W = 2, S = 4 (two shards a host), overhead 0.1: a host sends its 2 remote slices of
  // 750 B and its shards take 2 slices from the other worker: 2 messages, 2 x 0.1 + 1500 B /
  // 1000 B/s = 1.7 s a phase, 3.4 s both. Each host's 2 shards step 2 / 4 of the update.
  expect_split(predict(tiny(), hosts(2, 1000, 0, 0.1), ps_strategy{{}, 4}), 8.5, 3.4, 0);
}

// -- data-parallel: local SGD --------------------------------------------------------------

TEST(cost_model, local_sgd_amortises_its_average) {
  // W = 2, L = 4: the 3 s ring average every 4 steps = 0.75 s a step; bytes 6000 / 4.
  const prediction p = predict(tiny(), hosts(2), local_sgd_strategy{{}, 4, 25});
  EXPECT_EQ(p.strategy, "data-parallel:local-sgd");
  expect_split(p, 9, 0.75, 0);
  EXPECT_NEAR(p.wire_bytes, 1500, tolerance);
}

// -- pipeline ------------------------------------------------------------------------------

TEST(cost_model, gpipe_pays_the_bubble_every_minibatch) {
  // Stages {a}, {b}; M = 2 microbatches of 1 sample; latency 0.1. Per microbatch: stage a
  // 1 + 2 = 3 s, stage b 2 + 3 = 5 s, the link 2 x 100 B / 1000 B/s = 0.2 s: t = 5 s.
  // Compute 2 x 5 + update max(0.5, 0.5) = 10.5; bubble (S - 1) x 5 = 5; latency
  // 2 (S - 1) x 0.1 = 0.2. Bytes: 2 x 100 B per microbatch.
  pipeline_strategy s{{1, 2}, {}, 2, pipeline_schedule::gpipe};
  const prediction p = predict(tiny(2), hosts(2, 1000, 0.1), s);
  EXPECT_EQ(p.strategy, "pipeline:gpipe");
  expect_split(p, 10.5, 0.2, 5);
  EXPECT_EQ(p.hosts, 2);
  EXPECT_EQ(p.samples_per_step, 2);
  EXPECT_NEAR(p.wire_bytes, 400, tolerance);
}

TEST(cost_model, one_f_one_b_steps_every_microbatch_and_fills_once_per_epoch) {
  // Per microbatch with the update: stage a 3.5 s, stage b 5.5 s. A minibatch 2 x 5.5 = 11;
  // 10 steps an epoch share one fill: bubble 5.5 / 10, latency 0.2 / 10.
  workload w = tiny(2);
  w.samples_per_epoch = 20;
  pipeline_strategy s{{1, 2}, {}, 2, pipeline_schedule::one_f_one_b};
  const prediction p = predict(w, hosts(2, 1000, 0.1), s);
  EXPECT_EQ(p.strategy, "pipeline:1f1b");
  expect_split(p, 11, 0.02, 0.55);
}

TEST(cost_model, a_slow_link_is_the_slowest_stage) {
  // 10 B/s: the link takes 2 x 100 / 10 = 20 s a microbatch, 15 s more than stage b.
  // Compute 10.5; communication 2 x 15 + 0.2 latency; bubble 20.
  pipeline_strategy s{{1, 2}, {}, 2, pipeline_schedule::gpipe};
  expect_split(predict(tiny(2), hosts(2, 10, 0.1), s), 10.5, 30.2, 20);
}

TEST(cost_model, replicas_share_microbatches_and_exchange_their_gradients) {
  // Stage b on 2 replicas: 5 / 2 = 2.5 s a microbatch, stage a 3 s is now the slowest.
  // Compute 2 x 3 + 0.5; the group's exchange 1 x 2000 B / 1000 B/s = 2; bubble 3.
  // Bytes 400 + 2 x 1 x 2000.
  pipeline_strategy s{{1, 2}, {1, 2}, 2, pipeline_schedule::gpipe};
  const prediction p = predict(tiny(2), hosts(3), s);
  expect_split(p, 6.5, 2, 3);
  EXPECT_EQ(p.hosts, 3);
  EXPECT_NEAR(p.wire_bytes, 4400, tolerance);
}

TEST(cost_model, without_stages_the_fastest_straight_pipeline_is_taken) {
  // Layers of 1, 1, 1 and 3 s (forward only, 8 B activations), gpipe, M = 4:
  // 1 stage: 4 x 6 = 24 s; 2 stages {a, b, c} {d}: t = 3, 4 x 3 + 1 x 3 = 15 s;
  // 3 stages: t = 3 (d alone), 12 + 6 = 18 s; 4 stages: 12 + 9 = 21 s. Two stages win,
  // on 2 hosts as on 8.
  workload w;
  w.layers = {{"a", 1, 0, 0, 8, 0}, {"b", 1, 0, 0, 8, 0}, {"c", 1, 0, 0, 8, 0},
              {"d", 3, 0, 0, 8, 0}};
  w.batch_size = 4;
  pipeline_strategy s{{}, {}, 4, pipeline_schedule::gpipe};
  for (int32_t h : {2, 8}) {
    const prediction p = predict(w, hosts(h, 1e12), s);
    EXPECT_EQ(p.hosts, 2);
    expect_split(p, 12, 0, 3);
  }
  // At 1 B/s a link costs 2 x 8 / 1 = 16 s a microbatch: one stage, 24 s, no wire.
  const prediction slow = predict(w, hosts(8, 1), s);
  EXPECT_EQ(slow.hosts, 1);
  expect_split(slow, 24, 0, 0);
  EXPECT_EQ(slow.wire_bytes, 0);
}

// -- IST -----------------------------------------------------------------------------------

TEST(cost_model, ist_trains_a_subnet_and_exchanges_it_per_round) {
  // W = S = 2, L = 5, subnet 1/2: compute 9 / 2 = 4.5 s. The subnet is 1500 B; each host
  // gets 750 B from the other's shard and returns it: 0.75 s each way, 1.5 s a round,
  // 0.3 s a step. Bytes 2 x (W - 1) x 1500 / 5. An epoch of 21 samples: floor(21 / 1 / 2).
  workload w = tiny();
  w.samples_per_epoch = 21;
  const prediction p = predict(w, hosts(2), ist_strategy{0, 5, 0});
  EXPECT_EQ(p.strategy, "ist");
  expect_split(p, 4.5, 0.3, 0);
  EXPECT_NEAR(p.wire_bytes, 600, tolerance);
  EXPECT_EQ(p.samples_per_step, 2);
  EXPECT_EQ(p.steps_per_epoch, 10);
}

TEST(cost_model, ist_subnet_fraction_follows_the_bytes_formula) {
  // 4 -> [8] -> 2, W = 2: whole 32 + 16 + 2 x 8 = 64; subnet 48 / 2 + 16 / 2 = 32.
  EXPECT_NEAR(ist_mlp_subnet_fraction(4, {8}, 2, 2), 0.5, tolerance);
  // 4 -> [4, 4] -> 2: whole 16 + 8 + 16 + 16 (batch norm) = 56; subnet 24 / 2 + 16 / 4 +
  // 16 / 2 = 24 (model::ist::bytes_formula's count).
  EXPECT_NEAR(ist_mlp_subnet_fraction(4, {4, 4}, 2, 2), 24.0 / 56, tolerance);
}

TEST(cost_model, ist_from_its_mlp_shrinks_the_subnet_with_more_workers) {
  // The mlp 4 -> [8] -> 2 of the case above: f = 1/2 at W = 2, which predicts what the
  // fraction given does; at W = 4: (32 + 16) / 4 + 16 / 4 = 16 of 64 = 1/4.
  ist_strategy from_mlp{0, 5, 0, 4, {8}, 2};
  const prediction two = predict(tiny(), hosts(2), from_mlp);
  const prediction given = predict(tiny(), hosts(2), ist_strategy{0, 5, 0.5});
  EXPECT_NEAR(two.step_seconds, given.step_seconds, tolerance);
  EXPECT_NEAR(predict(tiny(), hosts(4), from_mlp).compute_seconds, 9.0 / 4, tolerance);
}

TEST(cost_model, ist_takes_its_subnets_timed_step_and_scales_it_by_f) {
  // The subnet timed at W = 2 steps in 6 s (not f x 9 = 4.5): the compute at W = 2;
  // at W = 4 the mlp's f halves (1/2 -> 1/4): 3 s. The exchange is the subnet's bytes as
  // before (0.3 s a step at W = 2).
  ist_strategy timed{0, 5, 0, 4, {8}, 2};
  timed.subnet_step_seconds = 6;
  timed.subnet_workers = 2;
  expect_split(predict(tiny(), hosts(2), timed), 6, 0.3, 0);
  EXPECT_NEAR(predict(tiny(), hosts(4), timed).compute_seconds, 3, tolerance);
  EXPECT_NEAR(ist_worker_step_seconds(tiny(), timed, 4), 3, tolerance);
}

TEST(cost_model, ist_adds_a_timed_round_s_own_work) {
  // The subnet's step timed at W = 2, S = 2 (6 s, as above), with a round's own work:
  // assembly 1 s and cut 2 s to the worker's compute, 3 s / L = 0.6 s a step more; the
  // shards' partition 0.5 s, and W = 2 pieces taken at 0.25 s and written back at 0.5 s
  // one after the other (the last after one take and two puts: 1.25 s), 1.75 s a round,
  // to the communication beside the exchange: 0.3 + 0.35 s.
  ist_strategy timed{0, 5, 0, 4, {8}, 2};
  timed.subnet_step_seconds = 6;
  timed.subnet_workers = 2;
  timed.round = {1, 2, 0.5, 0.25, 0.5};
  timed.timed_shards = 2;
  expect_split(predict(tiny(), hosts(2), timed), 6 + 3.0 / 5, 0.3 + 1.75 / 5, 0);
  // At W = 4, S = 4: a subnet of f = 1/4 instead of 1/2 halves the worker's figures, and
  // a shard's piece of it (f / S) is a quarter of one at W = 2 (1/4 of 1/2 against 1/2 of 1/2).
  const ist_round_seconds four = ist_round_of(timed, 4, 4);
  EXPECT_NEAR(four.assemble, 0.5, tolerance);
  EXPECT_NEAR(four.split, 1, tolerance);
  EXPECT_NEAR(four.partition, 0.5, tolerance);
  EXPECT_NEAR(four.take, 0.0625, tolerance);
  EXPECT_NEAR(four.put, 0.125, tolerance);
  // Nothing timed: nothing added.
  timed.timed_shards = 0;
  EXPECT_NEAR(ist_round_of(timed, 2, 2).put, 0, tolerance);
  expect_split(predict(tiny(), hosts(2), timed), 6, 0.3, 0);
}

TEST(cost_model, shards_zero_are_one_per_host) {
  EXPECT_NEAR(predict(tiny(), hosts(3), ps_strategy{{}, 0}).step_seconds,
              predict(tiny(), hosts(3), ps_strategy{{}, 3}).step_seconds, tolerance);
  EXPECT_NEAR(predict(tiny(), hosts(3), ist_strategy{0, 5, 0}).step_seconds,
              predict(tiny(), hosts(3), ist_strategy{3, 5, 0}).step_seconds, tolerance);
}

// -- the evaluation after each epoch ------------------------------------------------------

TEST(cost_model, evaluation_is_the_test_forward_over_the_epoch) {
  // local, 4 samples an epoch at 1 a step: 4 steps. 2 test samples: forward 3 s each,
  // 6 s an epoch, 1.5 s a step: 9 + 1.5.
  workload w = tiny();
  w.samples_per_epoch = 4;
  w.test_samples = 2;
  const prediction p = predict(w, hosts(1), local_strategy{});
  EXPECT_NEAR(p.evaluation_seconds, 1.5, tolerance);
  EXPECT_NEAR(p.step_seconds, 10.5, tolerance);
  // IST on 2 hosts: worker 0 first pulls the other half of the 3000 B network (1.5 s at
  // 1000 B/s), then 6 s of forward; an epoch of floor(4 / 1 / 2) = 2 steps: 3.75 s a step.
  EXPECT_NEAR(predict(w, hosts(2), ist_strategy{0, 5, 0}).evaluation_seconds, 3.75, tolerance);
  // Without an epoch size nothing is amortised.
  w.samples_per_epoch = 0;
  EXPECT_EQ(predict(w, hosts(1), local_strategy{}).evaluation_seconds, 0);
}

TEST(cost_model, a_pipeline_evaluates_through_its_stages) {
  // Stages [a], [b], M = 1, 1 sample a microbatch: forwards 1 s and 2 s, the link after a
  // 100 B / 1000 B/s = 0.1 s. 3 test microbatches: the first crosses all (1 + 0.1 + 2),
  // then one every 2 s: 7.1 s an epoch of 2 steps, 3.55 s a step.
  workload w = tiny();
  w.samples_per_epoch = 2;
  w.test_samples = 3;
  pipeline_strategy s;
  s.stage_ends = {1, 2};
  s.schedule = pipeline_schedule::gpipe;
  EXPECT_NEAR(predict(w, hosts(2), s).evaluation_seconds, 3.55, tolerance);
}

TEST(cost_model, crossovers_of_strategies_with_their_own_workloads) {
  // The grid above with each strategy given its workload: the same crossovers; and the
  // ring's workload at batch 2 (2 W samples in 2 x 8 + 1 + 2 (W - 1) / W x 3000 / B s, the
  // update does not scale, against local's 1 in 9 s) moves W = 2's to 3000 / 19 B/s.
  const auto same = crossovers({{tiny(), local_strategy{}}, {tiny(), ring_strategy{}}},
                               link_model{}, {2, 3, 4}, {100, 250, 1000});
  ASSERT_EQ(same.size(), 4u);
  EXPECT_NEAR(same[0].at, 3000.0 / 9, 1e-5);
  const auto moved = crossovers({{tiny(), local_strategy{}}, {tiny(2), ring_strategy{}}},
                                link_model{}, {2}, {100, 1000});
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_NEAR(moved[0].at, 3000.0 / 19, 1e-5);
}

TEST(cost_model, crossovers_are_named_as_chosen_and_said_once) {
  // fine-tune:adaptive is costed as a ring: its crossovers with local name it, not the
  // ring, and a sentence two host counts give alike (none here) or two strategies costed
  // alike cross a third with is said once.
  const auto named = crossovers({{tiny(), local_strategy{}},
                                 {tiny(), ring_strategy{}, "fine-tune:adaptive"}},
                                link_model{}, {2, 3, 4}, {100, 250, 1000});
  ASSERT_EQ(named.size(), 4u);
  for (const auto& x : named)
    EXPECT_TRUE(x.faster_above == "fine-tune:adaptive" || x.faster_below == "fine-tune:adaptive")
      << x.sentence();
  const auto twice = crossovers({{tiny(), local_strategy{}}, {tiny(), ring_strategy{}},
                                 {tiny(), ring_strategy{}}},
                                link_model{}, {2, 3, 4}, {100, 250, 1000});
  std::set<std::string> sentences;
  for (const auto& x : twice)
    EXPECT_TRUE(sentences.insert(x.sentence()).second) << "said twice: " << x.sentence();
  EXPECT_EQ(twice.size(), 4u);
}

// -- a shaped link's burst ----------------------------------------------------------------

TEST(cost_model, a_burst_credits_each_exchange_with_what_its_link_idled) {
  // A token bucket of 1000 B (1 s of the link), refilled while the link idles.
  cluster c = hosts(2);
  c.link.burst = 1000;
  // Ring, one 3000 B bucket: each host sends 3000 B after 9 s without traffic (update,
  // forward, backward): 1000 B pass at once, 3 - 1 = 2 s exposed.
  expect_split(predict(tiny(), c, ring_strategy{}), 9, 2, 0);
  // ps, S = 2: the push (1500 B a host) after the 8 s backward is credited 1 s (0.5 s
  // left); the pull follows the shards' 0.5 s step, which refills 500 B: 1.5 - 0.5 = 1 s.
  expect_split(predict(tiny(), c, ps_strategy{{}, 2}), 8.5, 1.5, 0);
  // Local SGD, L = 4: the 3 s average after 36 s of steps, credited 1 s: 2 / 4 a step.
  expect_split(predict(tiny(), c, local_sgd_strategy{{}, 4, 25}), 9, 0.5, 0);
  // IST, L = 5: the 750 B slices go back after 22.5 s of steps (credited whole), the
  // next round's 750 B come at once on the 250 B left: 0.5 s a round, 0.1 s a step.
  expect_split(predict(tiny(), c, ist_strategy{0, 5, 0}), 4.5, 0.1, 0);
  // A bucket that holds every byte leaves the fixed costs only.
  c.link.burst = 1e6;
  expect_split(predict(tiny(), c, ring_strategy{}), 9, 0, 0);
  // The bucket on its own: full at the start, refilled at the rate up to the burst.
  c.link.burst = 1000;
  token_bucket tokens(c.link);
  EXPECT_NEAR(tokens.send(400, 0), 0.4, tolerance);
  EXPECT_NEAR(tokens.send(1000, 0), 0.6, tolerance);
  EXPECT_NEAR(tokens.send(1000, 0.25), 0.25, tolerance);
  EXPECT_NEAR(tokens.send(1000, 60), 1, tolerance);
}

// -- properties ----------------------------------------------------------------------------

TEST(cost_model, more_bandwidth_is_never_slower_and_more_latency_never_faster) {
  std::mt19937_64 rng(24);
  for (int trial = 0; trial < 20; ++trial) {
    const workload w = random_workload(rng, 3 + trial % 6);
    for (const strategy& s : every_strategy())
      for (int32_t h : {1, 2, 3, 8}) {
        double previous = std::numeric_limits<double>::infinity();
        for (double gbit : {0.01, 0.1, 1.0, 10.0, 100.0}) {
          const double step = predict(w, hosts(h, gbit_per_second(gbit), 1e-4), s).step_seconds;
          EXPECT_LE(step, previous * (1 + 1e-12)) << name_of(s) << " W=" << h << " " << gbit;
          previous = step;
        }
        const double low = predict(w, hosts(h, 1e8, 1e-5, 1e-6), s).step_seconds;
        const double high = predict(w, hosts(h, 1e8, 1e-3, 1e-4), s).step_seconds;
        EXPECT_LE(low, high) << name_of(s) << " W=" << h;
      }
  }
}

TEST(cost_model, every_split_adds_up_and_one_host_needs_no_wire) {
  std::mt19937_64 rng(7);
  const workload w = random_workload(rng, 7);
  for (const strategy& s : every_strategy()) {
    const prediction p = predict(w, hosts(1, 1e8, 1e-4, 1e-5), s);
    EXPECT_NEAR(p.step_seconds, p.compute_seconds + p.communication_seconds + p.waiting_seconds,
                1e-12);
    EXPECT_EQ(p.wire_bytes, 0) << name_of(s);
    EXPECT_GE(p.communication_seconds, 0) << name_of(s);
  }
}

// -- projections and crossovers ------------------------------------------------------------

TEST(cost_model, projection_covers_every_host_count_and_rate) {
  const auto points = project(tiny(), ring_strategy{}, link_model{});
  ASSERT_EQ(points.size(), 15u);
  EXPECT_EQ(points.front().hosts, 4);
  EXPECT_EQ(points.back().hosts, 64);
  EXPECT_EQ(points[1].bandwidth, 1.25e9);
  // W = 4 at 1 Gbit/s: 2 x 3 x (750 B / 125e6 B/s) after the 9 s of compute.
  EXPECT_NEAR(points.front().predicted.step_seconds, 9 + 6 * 750 / 125e6, 1e-12);
}

TEST(cost_model, bandwidth_crossover_where_the_ring_costs_one_local_step) {
  // W = 2, one bucket: the ring's 2 samples take 9 + 3000 / B s, local's 1 sample 9 s;
  // equal samples/s where 3000 / B = 9, B = 333.33 B/s. Above it the ring leads.
  const auto x = bandwidth_crossover(tiny(), local_strategy{}, ring_strategy{}, hosts(2), 1, 1e6);
  ASSERT_TRUE(x.has_value());
  EXPECT_NEAR(x->at, 3000.0 / 9, 1e-5);
  EXPECT_EQ(x->faster_above, "data-parallel:ring");
  EXPECT_EQ(x->faster_below, "local");
  EXPECT_EQ(x->fixed, 2);
  EXPECT_NE(x->sentence().find("data-parallel:ring overtakes local above"), std::string::npos);
  // Over a range where the ring always leads: none.
  EXPECT_FALSE(
    bandwidth_crossover(tiny(), local_strategy{}, ring_strategy{}, hosts(2), 1e3, 1e6));
}

TEST(cost_model, hosts_crossover_where_the_ring_starts_to_pay) {
  // 250 B/s. W = 2: 2 / (9 + 3000 / 250 = 21) < 1 / 9: local leads. W = 3: the ring sends
  // 4 chunks of 1000 B, 16 s: 3 / 25 > 1 / 9, the ring leads from 3 hosts.
  const auto x =
    hosts_crossover(tiny(), local_strategy{}, ring_strategy{}, link_model{250, 0, 0}, {2, 3, 4});
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->at, 3);
  EXPECT_EQ(x->faster_above, "data-parallel:ring");
  EXPECT_EQ(x->along, crossover::axis::hosts);
}

TEST(cost_model, crossovers_of_a_grid) {
  // local against the ring, hosts 2, 3, 4, rates 100, 250, 1000 B/s. Along the bandwidth
  // (ring: W b samples in 9 + 2 (W - 1) / W x 3000 / B s against local's 1 in 9 s):
  // W = 2 at 3000 / 9, W = 3 at 4000 / 18, W = 4 at 4500 / 27 B/s. Along the hosts: at
  // 100 B/s local leads throughout, at 250 B/s the ring leads from 3 hosts (above), at
  // 1000 B/s the ring leads throughout.
  const auto found = crossovers(tiny(), {local_strategy{}, ring_strategy{}}, link_model{},
                                {2, 3, 4}, {100, 250, 1000});
  ASSERT_EQ(found.size(), 4u);
  EXPECT_NEAR(found[0].at, 3000.0 / 9, 1e-5);
  EXPECT_NEAR(found[1].at, 4000.0 / 18, 1e-5);
  EXPECT_NEAR(found[2].at, 4500.0 / 27, 1e-5);
  EXPECT_EQ(found[3].along, crossover::axis::hosts);
  EXPECT_EQ(found[3].at, 3);
  EXPECT_EQ(found[3].fixed, 250);
  for (const auto& x : found)
    EXPECT_EQ(x.faster_above, "data-parallel:ring");
}

// -- bad input -----------------------------------------------------------------------------

TEST(cost_model, nonsense_is_a_clear_error) {
  using baton::model::error;
  EXPECT_THROW(predict(tiny(), hosts(0), local_strategy{}), error);
  EXPECT_THROW(predict(tiny(), hosts(2, 0), ring_strategy{}), error);
  EXPECT_THROW(predict(workload{}, hosts(1), local_strategy{}), error);
  EXPECT_THROW(predict(tiny(), hosts(1), local_strategy{{3, false}}), error);
  EXPECT_THROW(predict(tiny(), hosts(2), ring_strategy{{}, 0, true}), error);
  EXPECT_THROW(predict(tiny(), hosts(2), pipeline_strategy{{1}, {}, 1}), error);
  EXPECT_THROW(predict(tiny(), hosts(2), pipeline_strategy{{1, 2}, {1, 3}, 2}), error);
  EXPECT_THROW(predict(tiny(), hosts(2), local_sgd_strategy{{}, 0, 25}), error);
  try {
    predict(tiny(), hosts(1), local_strategy{{3, false}});
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("frozen prefix of at most 2 layers"), std::string::npos);
  }
}
