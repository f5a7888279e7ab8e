#include "model/data_parallel/data_parallel.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "tests/support/tiny_model.hpp"
#include "model/core/stage_trainer.hpp"
#include "tests/support/synthetic_sets.hpp"

using namespace baton::model;
using baton::model::testing::kept_synthetic;
using baton::model::testing::tiny_model;

namespace {

const dataset& dp_train_data() { return kept_synthetic(64, 1, 28, 3); }
const dataset& dp_test_data() { return kept_synthetic(32, 1, 28, 4); }

data_parallel_settings base_spec(int32_t workers) {
  data_parallel_settings spec;
  spec.workers = workers;
  spec.batch_size = 8;
  spec.epochs = 2;
  spec.seed = 11;
  spec.optimizer = {0.05, 0.9, 1e-3};
  spec.bucket_mb = 0.002; // a few kB: several buckets
  return spec;
}

/// One step of `m` on the mean loss of `ids` (or of two halves, averaged),
/// with the same step function as the reference.
void plain_step(layered_model& m, std::vector<at::Tensor>& momentum, bool first,
                const std::vector<std::vector<int64_t>>& parts, const optimizer_spec& opt) {
  at::Tensor loss;
  for (const auto& ids : parts) {
    auto [images, labels] = gather(dp_train_data(), ids);
    auto l = torch::nn::functional::cross_entropy(m.forward(images), labels);
    loss = loss.defined() ? loss + l : l;
  }
  (loss / static_cast<double>(parts.size())).backward();
  torch::NoGradGuard no_grad;
  auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(sgd_step_out_of_place(params[i].detach(), params[i].grad(), momentum[i],
                                          opt, first));
    params[i].mutable_grad() = at::Tensor();
  }
}

/// tiny_model with batch norm (running statistics) after its first layer:
/// each worker's own buffers.
layered_model tiny_model_with_batch_norm() {
  auto layers = tiny_model().layers();
  layers.insert(layers.begin() + 2, {"bn1", torch::nn::AnyModule(torch::nn::BatchNorm1d(32))});
  return layered_model(std::move(layers));
}

std::vector<at::Tensor> zeros_like_parameters(const layered_model& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters())
    out.push_back(torch::zeros_like(p));
  return out;
}

int64_t sum_bits(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (auto x : v)
    s += x;
  return s;
}

} // namespace

// -- worker shares ---------------------------------------------------------------

TEST(data_parallel, shares_are_distributed_sampler_strides_of_the_epoch_order) {
  const auto order = epoch_order(12, 7, 1);
  for (int32_t w = 0; w < 3; ++w) {
    const auto share = worker_share(12, 7, 1, w, 3, remainder_policy::pad);
    ASSERT_EQ(share.size(), 4u);
    for (size_t i = 0; i < share.size(); ++i)
      EXPECT_EQ(share[i], order[w + 3 * i]);
  }
}

TEST(data_parallel, shares_are_disjoint_and_cover_the_epoch_when_divisible) {
  std::set<int64_t> seen;
  for (int32_t w = 0; w < 4; ++w)
    for (auto id : worker_share(40, 1, 0, w, 4, remainder_policy::drop))
      EXPECT_TRUE(seen.insert(id).second) << id;
  EXPECT_EQ(seen.size(), 40u);
}

TEST(data_parallel, remainder_is_padded_from_the_start_or_dropped) {
  const auto order = epoch_order(10, 2, 0);
  // pad: 12 = 10 + order[0], order[1]; worker 1 gets positions 1, 5, 9.
  EXPECT_EQ(worker_share(10, 2, 0, 1, 4, remainder_policy::pad),
            (std::vector<int64_t>{order[1], order[5], order[9]}));
  EXPECT_EQ(worker_share(10, 2, 0, 2, 4, remainder_policy::pad),
            (std::vector<int64_t>{order[2], order[6], order[0]}));
  // drop: the last 10 % 4 = 2 are not trained this epoch.
  EXPECT_EQ(worker_share(10, 2, 0, 1, 4, remainder_policy::drop),
            (std::vector<int64_t>{order[1], order[5]}));
  EXPECT_EQ(data_parallel_steps_per_epoch(10, 4, 2, remainder_policy::pad), 2);
  EXPECT_EQ(data_parallel_steps_per_epoch(10, 4, 2, remainder_policy::drop), 1);
  EXPECT_THROW(worker_share(10, 2, 0, 4, 4, remainder_policy::pad), error);
}

TEST(data_parallel, minibatches_keep_a_last_partial_one) {
  const auto batches = worker_minibatches({1, 2, 3, 4, 5}, 2);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2], (std::vector<int64_t>{5}));
  EXPECT_EQ(data_parallel_steps_per_epoch(20, 2, 4, remainder_policy::pad), 3);
}

// -- flat key space and shards ------------------------------------------------------

TEST(data_parallel, shard_ranges_cover_every_key_once_balanced_by_bytes) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m);
  EXPECT_EQ(layout.numel, parameter_count(m));
  for (int32_t shards : {1, 2, 3, 7}) {
    const auto ranges = shard_ranges(layout, shards);
    ASSERT_EQ(ranges.size(), static_cast<size_t>(shards));
    int64_t at = 0;
    for (const auto& r : ranges) {
      EXPECT_EQ(r.begin, at);
      EXPECT_LE(std::abs(r.size() - layout.numel / shards), 1);
      at = r.end;
    }
    EXPECT_EQ(at, layout.numel);
  }
  // With 3 shards fc1.weight (25088 elements) spans shards 0 and 1.
  const auto ranges = shard_ranges(layout, 3);
  EXPECT_EQ(keys_in(ranges[0], layout), (std::vector<size_t>{0}));
  EXPECT_EQ(keys_in(ranges[1], layout).front(), 0u);
}

TEST(data_parallel, frozen_prefix_is_the_first_keys_and_idles_its_shards) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m, 3); // flatten, fc1, relu1
  EXPECT_EQ(layout.frozen_numel, 784 * 32 + 32);
  EXPECT_EQ(keys_in(layout.frozen(), layout), (std::vector<size_t>{0, 1}));
  const auto ranges = shard_ranges(layout, 4);
  EXPECT_TRUE(trainable_part(ranges[0], layout).empty()); // all of it fc1: idle
  EXPECT_FALSE(trainable_part(ranges[3], layout).empty());
  int64_t exchanged = 0;
  for (const auto& r : ranges)
    exchanged += trainable_part(r, layout).size();
  EXPECT_EQ(exchanged, layout.trainable().size());
  EXPECT_THROW(make_flat_layout(m, 7), error);
}

TEST(data_parallel, flatten_slice_and_write_back_round_trip) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m);
  at::Tensor flat = flatten(m.parameters(), layout);
  const auto back = unflatten(flat, layout);
  const auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(back[i], params[i]));
  const key_range r{100, 26000}; // crosses fc1.weight / fc1.bias / fc2.weight
  at::Tensor copy = torch::zeros_like(flat);
  write_slice(copy, r, slice(flat, r) * 2);
  EXPECT_TRUE(torch::equal(slice(copy, r), slice(flat, r) * 2));
  EXPECT_EQ(copy.narrow(0, 0, 100).abs().sum().item<float>(), 0.0f);
}

TEST(data_parallel, a_range_flattened_alone_is_that_range_of_the_whole) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m);
  auto tensors = m.parameters();
  tensors[1] = at::Tensor(); // a parameter without a gradient: zeros
  const at::Tensor whole = flatten(tensors, layout);
  for (const key_range r : {key_range{100, 26000}, key_range{0, 10}, key_range{25100, 25120},
                            key_range{0, layout.numel}, key_range{5, 5}})
    EXPECT_TRUE(torch::equal(flatten_range(tensors, layout, r), slice(whole, r)));
  const key_range r{100, 26000};
  at::Tensor out = torch::empty({r.size()});
  const at::Tensor written = flatten_range(tensors, layout, r, out);
  EXPECT_EQ(written.data_ptr(), out.data_ptr());
  EXPECT_TRUE(torch::equal(out, slice(whole, r)));
  EXPECT_THROW(flatten_range(tensors, layout, r, torch::empty({5})), c10::Error);
}

// A parameter split across two shards steps right: stepping the flat vector
// shard by shard gives the bits of stepping each parameter whole.
TEST(data_parallel, stepping_shard_slices_equals_stepping_whole_parameters) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m);
  auto gen = at::detail::createCPUGenerator(1);
  const at::Tensor params = flatten(m.parameters(), layout);
  const at::Tensor grads = at::randn({layout.numel}, gen);
  const optimizer_spec opt{0.1, 0.9, 1e-3};
  std::vector<at::Tensor> whole;
  for (size_t i = 0; i < layout.keys.size(); ++i) {
    at::Tensor momentum = torch::zeros({layout.keys[i].range.size()});
    whole.push_back(sgd_step_out_of_place(slice(params, layout.keys[i].range).contiguous(),
                                          slice(grads, layout.keys[i].range).contiguous(),
                                          momentum, opt, true));
  }
  at::Tensor sharded = torch::empty_like(params);
  for (const auto& r : shard_ranges(layout, 3)) {
    at::Tensor momentum = torch::zeros({r.size()});
    write_slice(sharded, r,
                sgd_step_out_of_place(slice(params, r).contiguous(), slice(grads, r).contiguous(),
                                      momentum, opt, true));
  }
  EXPECT_TRUE(torch::equal(sharded, torch::cat(whole)));
}

// -- ring ----------------------------------------------------------------------------

TEST(data_parallel, ring_chunks_are_uneven_when_not_divisible) {
  const auto chunks = ring_chunks(10, 3);
  EXPECT_EQ(chunks, (std::vector<key_range>{{0, 4}, {4, 7}, {7, 10}}));
  EXPECT_EQ(ring_chunks(2, 3)[2].size(), 0);
  EXPECT_THROW(ring_chunks(10, 0), error);
}

// Follows every contribution through the schedule: at the end of the
// reduce-scatter worker w holds all of chunk w + 1, and after the all-gather
// every worker holds all of every chunk; what w receives is what its
// predecessor sent.
TEST(data_parallel, ring_schedule_reduces_then_gathers_every_chunk) {
  for (int32_t n : {2, 3, 5}) {
    // held[w][c]: bit set of the workers whose gradient w's chunk c contains.
    std::vector<std::vector<int64_t>> held(n, std::vector<int64_t>(n));
    for (int32_t w = 0; w < n; ++w)
      for (int32_t c = 0; c < n; ++c)
        held[w][c] = int64_t{1} << w;
    for (int32_t k = 0; k + 1 < n; ++k) {
      auto before = held;
      for (int32_t w = 0; w < n; ++w) {
        const int32_t c = reduce_scatter_send_chunk(w, k, n);
        EXPECT_EQ(reduce_scatter_receive_chunk(ring_next(w, n), k, n), c);
        EXPECT_EQ(before[ring_next(w, n)][c] & before[w][c], 0) << "counted twice";
        held[ring_next(w, n)][c] |= before[w][c];
      }
    }
    const int64_t all = (int64_t{1} << n) - 1;
    for (int32_t w = 0; w < n; ++w)
      EXPECT_EQ(held[w][(w + 1) % n], all) << n << " workers, worker " << w;
    for (int32_t k = 0; k + 1 < n; ++k) {
      auto before = held;
      for (int32_t w = 0; w < n; ++w) {
        const int32_t c = all_gather_send_chunk(w, k, n);
        EXPECT_EQ(all_gather_receive_chunk(ring_next(w, n), k, n), c);
        EXPECT_EQ(before[w][c], all);
        held[ring_next(w, n)][c] = before[w][c];
      }
    }
    for (const auto& row : held)
      EXPECT_EQ(sum_bits(row), all * n);
  }
}

TEST(data_parallel, ring_bytes_match_the_theory) {
  EXPECT_EQ(ring_bytes_sent(12, 4, 0, 3), 2 * 2 * 4 * 4);
  EXPECT_DOUBLE_EQ(ring_bytes_theory(48, 3), 64);
  int64_t total = 0; // uneven: the workers' bytes still add up to 2 (W-1) x bytes
  for (int32_t w = 0; w < 3; ++w)
    total += ring_bytes_sent(10, 4, w, 3);
  EXPECT_EQ(total, 2 * 2 * 10 * 4);
  EXPECT_EQ(ring_bytes_sent(10, 4, 0, 1), 0);
}

// Chunk c's terms are added starting at worker c and going round the ring.
TEST(data_parallel, ring_allreduce_sums_each_chunk_in_ring_order) {
  auto gen = at::detail::createCPUGenerator(2);
  std::vector<at::Tensor> g;
  for (int w = 0; w < 3; ++w)
    g.push_back(at::randn({1001}, gen) * std::pow(10.0, w * 3)); // rounding-sensitive
  const at::Tensor sum = ring_allreduce(g);
  const auto chunks = ring_chunks(1001, 3);
  for (int c = 0; c < 3; ++c) {
    const auto& r = chunks[c];
    const at::Tensor expected =
        (slice(g[c], r) + slice(g[(c + 1) % 3], r)) + slice(g[(c + 2) % 3], r);
    EXPECT_TRUE(torch::equal(slice(sum, r), expected)) << "chunk " << c;
  }
  EXPECT_TRUE(torch::equal(worker_order_sum(g), (g[0] + g[1]) + g[2]));
  EXPECT_TRUE(torch::equal(ring_allreduce({g[0]}), g[0]));
  EXPECT_THROW(ring_allreduce({g[0], at::zeros({3})}), error);
}

// A part of a bucket, meaned in one pass, has the bits of the whole bucket
// summed (in ring or worker order) then divided, wherever the part starts and
// however many chunk boundaries it crosses; an absent worker counts as zeros.
TEST(data_parallel, mean_of_workers_is_the_bucket_s_sum_then_its_division_bit_for_bit) {
  auto gen = at::detail::createCPUGenerator(5);
  const int64_t numel = 1003;
  for (int32_t workers : {2, 3, 4, 5})
    for (summation order : {summation::ring, summation::worker_order}) {
      std::vector<at::Tensor> g;
      for (int w = 0; w < workers; ++w)
        g.push_back(at::randn({numel}, gen) * std::pow(10.0, (w % 3) * 3)); // rounding-sensitive
      g[1].zero_(); // as bucket_flat puts an undefined gradient
      const auto sum = order == summation::ring ? ring_allreduce(g) : worker_order_sum(g);
      const at::Tensor want = mean_of_sum(sum, workers);
      const std::vector<std::pair<int64_t, int64_t>> spans{{0, numel}, {1, 500}, {250, 7},
                                                           {990, 13}};
      for (auto [first, n] : spans) {
        SCOPED_TRACE(std::to_string(workers) + " workers, elements " + std::to_string(first) +
                     " + " + std::to_string(n));
        std::vector<at::Tensor> parts;
        for (int w = 0; w < workers; ++w)
          parts.push_back(w == 1 ? at::Tensor() : g[w].narrow(0, first, n));
        at::Tensor got = torch::empty({n});
        mean_of_workers(parts, numel, first, order, got);
        EXPECT_TRUE(torch::equal(got, want.narrow(0, first, n)));
      }
    }
  at::Tensor out = torch::empty({4});
  EXPECT_THROW(mean_of_workers({at::zeros({4})}, 4, 0, summation::ring, out), error);
  EXPECT_THROW(mean_of_workers({at::zeros({4}), at::zeros({3})}, 4, 0, summation::ring, out),
               error);
  EXPECT_THROW(mean_of_workers({at::zeros({4}), at::zeros({4})}, 4, 1, summation::ring, out),
               error);
}

// What the cost model takes for `--mode local`: the loop's steady step, for
// every path the reference takes (one worker; two workers' fused step on two
// lanes; three workers' mean then the step; adam), and an error for a bad
// request. The stopping settings of the spec are the timing's own.
TEST(data_parallel, the_reference_s_steps_are_timed_whole_on_its_lanes) {
  optimizer_spec sgd;
  sgd.name = "sgd";
  sgd.momentum = 0.9;
  optimizer_spec adam;
  adam.name = "adam";
  EXPECT_TRUE(steps_of_two_means(2, sgd, false));
  EXPECT_FALSE(steps_of_two_means(2, sgd, true));
  EXPECT_FALSE(steps_of_two_means(3, sgd, false));
  EXPECT_FALSE(steps_of_two_means(2, adam, false));
  for (auto [workers, lanes] : {std::pair{1, 1}, std::pair{2, 2}, std::pair{3, 2}})
    for (const auto& optimizer : {sgd, adam}) {
      auto spec = base_spec(workers);
      spec.optimizer = optimizer;
      spec.concurrent_workers = lanes;
      spec.target_accuracy = 1.0;    // the timing's epoch is its own: no stop
      spec.stop_after_seconds = 1e-9;
      EXPECT_GT(time_reference_steps(tiny_model, spec, {1, 28, 28}, 10, 3, 2), 0)
        << workers << " " << optimizer.name;
    }
  EXPECT_THROW(time_reference_steps(tiny_model, base_spec(2), {1, 28, 28}, 10, 0), error);
  EXPECT_THROW(time_reference_steps(tiny_model, base_spec(2), {1, 28, 28}, 0), error);
}

// Issue 34: what the cost model scales a layers' profile to: one model's
// step timed whole (one worker, whatever the spec's W and sync) while a copy
// times beside it; the caller's torch thread count, which each copy's thread
// sets, is as it was; several steps' worth of samples fill `min_seconds`.
TEST(data_parallel, a_whole_step_is_timed_beside_its_copies_and_the_caller_keeps_its_threads) {
  auto spec = base_spec(3);
  spec.sync_every = 2;
  const int before = at::get_num_threads();
  EXPECT_GT(time_whole_step(tiny_model, spec, {1, 28, 28}, 10, 2, 0.02), 0);
  EXPECT_EQ(at::get_num_threads(), before);
  EXPECT_GT(time_whole_step(tiny_model, spec, {1, 28, 28}, 10), 0);
  EXPECT_THROW(time_whole_step(tiny_model, spec, {1, 28, 28}, 10, 0), error);
  EXPECT_EQ(at::get_num_threads(), before);
}

// -- buckets ---------------------------------------------------------------------------

TEST(data_parallel, buckets_take_trainable_keys_in_reverse_order) {
  const auto m = tiny_model();
  const auto layout = make_flat_layout(m, 3);
  const auto buckets = make_buckets(layout, 0.001); // 1 kiB: 262 floats
  std::vector<size_t> order;
  for (const auto& b : buckets) {
    int64_t numel = 0;
    for (size_t i = 0; i < b.keys.size(); ++i) {
      numel += layout.keys[b.keys[i]].range.size();
      if (i + 1 < b.keys.size())
        EXPECT_LT(numel * 4, 1024) << "closed late";
    }
    EXPECT_EQ(numel, b.numel);
    order.insert(order.end(), b.keys.begin(), b.keys.end());
  }
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 3, 2})); // fc3.bias ... fc2.weight
  EXPECT_EQ(make_buckets(layout).size(), 1u);
  std::vector<at::Tensor> back(layout.keys.size());
  const auto params = m.parameters();
  for (const auto& b : buckets)
    scatter_bucket(b, layout, bucket_flat(b, layout, params), back);
  EXPECT_FALSE(back[0].defined());
  for (size_t i = 2; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(back[i], params[i]));
}

// -- learning rate ------------------------------------------------------------------

TEST(data_parallel, lr_is_scaled_linearly_and_warmed_up) {
  lr_schedule s{0.1, true, 1024, 256, 2}; // target 0.4 after 2 epochs of 10 steps
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0, 10), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 10, 10), 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 20, 10), 0.4);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 500, 10), 0.4);
  s.warmup_epochs = 0;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0, 10), 0.4);
  s.linear_scaling = false;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0, 10), 0.1);
  EXPECT_THROW(scheduled_lr(s, 0, 0), error);
}

// -- the local reference -----------------------------------------------------------

TEST(data_parallel, one_worker_equals_plain_sgd_bit_for_bit) {
  auto spec = base_spec(1);
  const auto result = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  auto m = tiny_model();
  auto momentum = zeros_like_parameters(m);
  bool first = true;
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    const auto order = epoch_order(dp_train_data().size(), spec.seed, epoch);
    for (size_t begin = 0; begin < order.size(); begin += 8, first = false)
      plain_step(m, momentum, first, {{order.begin() + begin, order.begin() + begin + 8}},
                 spec.optimizer);
  }
  EXPECT_EQ(result.steps, 16);
  EXPECT_EQ(result.samples, 128);
  EXPECT_EQ(result.weights_digest, weights_digest(m));
  EXPECT_NE(result.weights_digest, weights_digest(tiny_model()));
  ASSERT_EQ(result.test_accuracy.size(), 2u);
  EXPECT_LT(result.train_loss[1], result.train_loss[0]);
}

// The reference steps with the scheduled lr: linear scaling (global batch 8
// over base 4: x2) and one epoch of warmup, step by step.
TEST(data_parallel, one_worker_follows_the_scaled_and_warmed_up_lr) {
  auto spec = base_spec(1);
  spec.linear_scaling = true;
  spec.base_batch = 4;
  spec.warmup_epochs = 1;
  const auto result = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  const lr_schedule schedule{spec.optimizer.lr, true, 8, 4, 1};
  auto m = tiny_model();
  auto momentum = zeros_like_parameters(m);
  int64_t step = 0;
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    const auto order = epoch_order(dp_train_data().size(), spec.seed, epoch);
    for (size_t begin = 0; begin < order.size(); begin += 8, ++step) {
      optimizer_spec opt = spec.optimizer;
      opt.lr = scheduled_lr(schedule, step, 8);
      plain_step(m, momentum, step == 0, {{order.begin() + begin, order.begin() + begin + 8}},
                 opt);
    }
  }
  EXPECT_EQ(result.weights_digest, weights_digest(m));
  EXPECT_NE(result.weights_digest,
            run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), base_spec(1))
                .weights_digest);
}

// The step function is torch::optim::SGD's arithmetic (to rounding).
TEST(data_parallel, one_worker_is_torch_sgd_to_float_tolerance) {
  const auto spec = base_spec(1);
  const auto result = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  auto m = tiny_model();
  torch::optim::SGD sgd(m.parameters(), torch::optim::SGDOptions(spec.optimizer.lr)
                                            .momentum(spec.optimizer.momentum)
                                            .weight_decay(spec.optimizer.weight_decay));
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    const auto order = epoch_order(dp_train_data().size(), spec.seed, epoch);
    for (size_t begin = 0; begin < order.size(); begin += 8) {
      auto [images, labels] = gather(dp_train_data(), {order.begin() + begin,
                                                    order.begin() + begin + 8});
      sgd.zero_grad();
      torch::nn::functional::cross_entropy(m.forward(images), labels).backward();
      sgd.step();
    }
  }
  const auto got = result.model.parameters();
  const auto want = m.parameters();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-6)) << i;
}

// DESIGN invariant 2: W = 2 and W = 3 (uneven chunks), ring and worker-order
// sums, == the local run with gradient accumulation over the global minibatch.
TEST(data_parallel, workers_equal_gradient_accumulation_over_the_global_minibatch) {
  for (int32_t workers : {2, 3})
    for (summation sum : {summation::ring, summation::worker_order}) {
      auto spec = base_spec(workers);
      spec.sum = sum;
      spec.remainder = remainder_policy::drop;
      const auto result =
        run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
      auto m = tiny_model();
      auto momentum = zeros_like_parameters(m);
      bool first = true;
      for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
        std::vector<std::vector<std::vector<int64_t>>> batches;
        for (int32_t w = 0; w < workers; ++w)
          batches.push_back(worker_minibatches(
              worker_share(64, spec.seed, epoch, w, workers, spec.remainder), 8));
        for (size_t k = 0; k < batches[0].size(); ++k, first = false) {
          std::vector<std::vector<int64_t>> parts;
          for (const auto& b : batches)
            parts.push_back(b[k]);
          plain_step(m, momentum, first, parts, spec.optimizer);
        }
      }
      const auto got = result.model.parameters();
      const auto want = m.parameters();
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-6))
            << workers << " workers, parameter " << i;
    }
}

// W = 2 by hand, bit for bit (a sum of two has one order): each replica runs
// its own minibatch (so its own batch norm statistics), the gradients are
// averaged, worker 0 steps and its weights are copied; the result keeps
// worker 0's running statistics.
TEST(data_parallel, two_workers_by_hand_bit_for_bit_with_per_worker_batch_norm) {
  const auto make = tiny_model_with_batch_norm;
  auto spec = base_spec(2);
  const auto result = run_data_parallel_local(make, dp_train_data(), dp_test_data(), spec);
  std::vector<layered_model> models{make(), make()};
  auto momentum = zeros_like_parameters(models[0]);
  int64_t step = 0;
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch)
    for (size_t k = 0; k < 4; ++k, ++step) {
      std::vector<std::vector<at::Tensor>> grads(2);
      for (int32_t w = 0; w < 2; ++w) {
        const auto share = worker_share(64, spec.seed, epoch, w, 2, spec.remainder);
        auto [images, labels] =
            gather(dp_train_data(), {share.begin() + 8 * k, share.begin() + 8 * (k + 1)});
        torch::nn::functional::cross_entropy(models[w].forward(images), labels).backward();
        for (auto& p : models[w].parameters()) {
          grads[w].push_back(p.grad().clone());
          p.mutable_grad() = at::Tensor();
        }
      }
      torch::NoGradGuard no_grad;
      auto p0 = models[0].parameters(), p1 = models[1].parameters();
      for (size_t i = 0; i < p0.size(); ++i) {
        p0[i].copy_(sgd_step_out_of_place(p0[i].detach(), at::div(grads[0][i] + grads[1][i], 2.0),
                                          momentum[i], spec.optimizer, step == 0));
        p1[i].copy_(p0[i]);
      }
    }
  EXPECT_EQ(result.weights_digest, weights_digest(models[0]));
  const auto got = result.model.buffers(), want0 = models[0].buffers(),
             want1 = models[1].buffers();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(torch::equal(got[0], want0[0])); // worker 0's running mean
  EXPECT_FALSE(torch::equal(got[0], want1[0]));
}

TEST(data_parallel, frozen_prefix_never_changes) {
  auto spec = base_spec(2);
  spec.freeze_up_to = "relu1";
  const auto result = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  EXPECT_EQ(result.frozen_layers, 3u);
  EXPECT_EQ(weights_digest(result.model.slice(0, 3)), weights_digest(tiny_model().slice(0, 3)));
  EXPECT_NE(weights_digest(result.model.slice(3, 6)), weights_digest(tiny_model().slice(3, 6)));
  spec.freeze_up_to = "no_such_layer";
  EXPECT_THROW(run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec), error);
}

TEST(data_parallel, local_sgd_with_one_worker_equals_plain_sgd) {
  auto spec = base_spec(1);
  const auto plain = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  spec.sync_every = 3;
  const auto local = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  EXPECT_EQ(local.weights_digest, plain.weights_digest);
}

// L = 2, W = 2: each worker steps its own copy (own momentum) twice, then the
// copies are averaged ((a + b) / 2: the ring's sum of two is a + b).
TEST(data_parallel, local_sgd_averages_every_l_steps) {
  auto spec = base_spec(2);
  spec.sync_every = 2;
  const auto result = run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), spec);
  std::vector<layered_model> models{tiny_model(), tiny_model()};
  std::vector<std::vector<at::Tensor>> momentum{zeros_like_parameters(models[0]),
                                                zeros_like_parameters(models[1])};
  int64_t step = 0;
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch)
    for (size_t k = 0; k < 4; ++k, ++step) {
      for (int32_t w = 0; w < 2; ++w) {
        const auto share = worker_share(64, spec.seed, epoch, w, 2, spec.remainder);
        plain_step(models[w], momentum[w], step == 0,
                   {{share.begin() + 8 * k, share.begin() + 8 * (k + 1)}}, spec.optimizer);
      }
      if (step % 2 == 1) {
        torch::NoGradGuard no_grad;
        auto a = models[0].parameters(), b = models[1].parameters();
        for (size_t i = 0; i < a.size(); ++i) {
          const at::Tensor mean = at::div(a[i] + b[i], 2.0);
          a[i].copy_(mean);
          b[i].copy_(mean);
        }
      }
    }
  EXPECT_EQ(result.weights_digest, weights_digest(models[0]));
  EXPECT_NE(result.weights_digest,
            run_data_parallel_local(tiny_model, dp_train_data(), dp_test_data(), base_spec(2))
              .weights_digest);
}

// The workers computed at once on their own threads (worker_lanes) give
// what they give one after another, bit for bit: each worker's arithmetic
// is its own, its thread count unchanged (one), and the loss is summed in
// worker order; the mean and the optimizer's step, cut between the lanes,
// are elementwise. Synchronous with per-worker batch norm (SGD, and AdamW
// with clipping), local SGD, and three workers on two lanes.
TEST(data_parallel, workers_computed_at_once_equal_one_after_another) {
  const auto with_norm = tiny_model_with_batch_norm;
  for (int32_t workers : {2, 3})
    for (int32_t sync_every : {0, 2, -1}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + ", sync_every " +
                   std::to_string(sync_every));
      auto spec = base_spec(workers);
      spec.sync_every = std::max(0, sync_every);
      if (sync_every < 0) { // synchronous AdamW, clipped
        spec.optimizer.name = "adamw";
        spec.optimizer.lr = 0.01;
        spec.optimizer.clip_grad_norm = 0.5;
      }
      const auto one_by_one = run_data_parallel_local(with_norm, dp_train_data(),
                                                      dp_test_data(), spec);
      spec.concurrent_workers = 2;
      spec.threads_per_worker = 1;
      const auto at_once = run_data_parallel_local(with_norm, dp_train_data(), dp_test_data(),
                                                   spec);
      EXPECT_EQ(at_once.weights_digest, one_by_one.weights_digest);
      EXPECT_EQ(at_once.train_loss, one_by_one.train_loss);
      EXPECT_EQ(at_once.test_accuracy, one_by_one.test_accuracy);
      EXPECT_TRUE(torch::equal(at_once.model.buffers()[0], one_by_one.model.buffers()[0]));
    }
}

// -- tied weights (DESIGN invariant 14) -------------------------------------------

TEST(data_parallel, a_tied_tensor_is_one_key_of_the_layout) {
  const auto m = baton::model::testing::tied_model();
  const auto layout = make_flat_layout(m);
  std::vector<std::string> names;
  for (const auto& key : layout.keys)
    names.push_back(key.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                             "fc2b.bias", "fc3.weight", "fc3.bias"}));
  EXPECT_EQ(layout.numel, 784 * 32 + 32 + 32 * 32 + 32 + 32 + 32 * 10 + 10);
  // fc2 frozen (layers flatten..fc2): the tied tensor is in the frozen prefix.
  EXPECT_EQ(make_flat_layout(m, 4).frozen_numel, 784 * 32 + 32 + 32 * 32 + 32);
}

// Two workers on a model whose fc2b uses fc2's weight take torch::optim::SGD's
// steps over the model's distinct tensors (each stepped once, with the
// gradient of both uses), on the global minibatch.
TEST(data_parallel, tied_weights_step_once_as_torch_sgd_steps_them) {
  using baton::model::testing::tied_model;
  auto spec = base_spec(2);
  spec.remainder = remainder_policy::drop;
  const auto result = run_data_parallel_local(tied_model, dp_train_data(), dp_test_data(), spec);
  auto m = tied_model();
  // The distinct tensors, picked by hand (not through named_parameters).
  std::vector<std::pair<std::string, at::Tensor>> distinct;
  for (const char* layer : {"fc1", "fc2", "fc2b", "fc3"})
    for (const auto& p : m.layers()[m.index_of(layer)].module.ptr()->named_parameters())
      if (!(std::string(layer) == "fc2b" && p.key() == "weight"))
        distinct.emplace_back(std::string(layer) + "." + p.key(), p.value());
  std::vector<at::Tensor> tensors;
  for (const auto& d : distinct)
    tensors.push_back(d.second);
  torch::optim::SGD sgd(tensors, torch::optim::SGDOptions(spec.optimizer.lr)
                                   .momentum(spec.optimizer.momentum)
                                   .weight_decay(spec.optimizer.weight_decay));
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    std::vector<std::vector<std::vector<int64_t>>> batches;
    for (int32_t w = 0; w < 2; ++w)
      batches.push_back(
        worker_minibatches(worker_share(64, spec.seed, epoch, w, 2, spec.remainder), 8));
    for (size_t k = 0; k < batches[0].size(); ++k) {
      std::vector<int64_t> ids = batches[0][k]; // equal halves: the mean of the two means
      ids.insert(ids.end(), batches[1][k].begin(), batches[1][k].end());
      auto [images, labels] = gather(dp_train_data(), ids);
      sgd.zero_grad();
      torch::nn::functional::cross_entropy(m.forward(images), labels).backward();
      sgd.step();
    }
  }
  std::map<std::string, at::Tensor> got;
  for (const auto& layer : result.model.layers())
    for (const auto& p : layer.module.ptr()->named_parameters())
      got.emplace(layer.name + "." + p.key(), p.value());
  for (const auto& [name, want] : distinct)
    EXPECT_TRUE(torch::allclose(got.at(name), want, 1e-4, 1e-5)) << name;
  // The trained model keeps the tie.
  EXPECT_TRUE(got.at("fc2b.weight").is_same(got.at("fc2.weight")));
}
