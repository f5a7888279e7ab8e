#include "model/core/stage_trainer.hpp"

#include <map>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/core/error.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"
#include "tests/support/tiny_model.hpp"

using namespace baton::model;
using baton::model::testing::spec_of;
using baton::model::testing::tiny_norm;
using baton::model::testing::tiny_norm_model;

namespace {

layered_model head_model() {
  return make_model(spec_of("head", 7));
}

struct microbatch_data {
  at::Tensor features;
  at::Tensor labels;
};

std::vector<microbatch_data> make_data(int count, int64_t batch) {
  auto gen = at::detail::createCPUGenerator(99);
  std::vector<microbatch_data> out;
  for (int i = 0; i < count; ++i)
    out.push_back({at::randn({batch, 256}, gen), at::randint(0, 10, {batch}, gen)});
  return out;
}

optimizer_spec sgd() {
  return {0.05, 0.9, 1e-4};
}

void expect_close(const layered_model& a, const layered_model& b) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(torch::allclose(pa[i].second, pb[i].second, 1e-5, 1e-6)) << pa[i].first;
}

} // namespace

// DESIGN invariant 2 at the model level: two stages run in GPipe order
// (all forwards, all backwards, one step per minibatch) end with the weights
// of the whole model trained locally with gradient accumulation.
TEST(stage_trainer, gpipe_order_equals_local_gradient_accumulation) {
  constexpr int steps = 3, micro = 4;
  auto data = make_data(steps * micro, 8);
  auto whole = head_model();
  stage_trainer first{whole.slice(0, 1), sgd(), stash_mode::stash};
  stage_trainer last{whole.slice(1, 3), sgd(), stash_mode::stash};
  head_trainer reference{head_model(), make_task("all10", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), sgd()};
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < micro; ++m) {
      auto& d = data[s * micro + m];
      last.forward(m, first.forward(m, d.features, true), false);
      reference.train(d.features, d.labels, micro, m == micro - 1);
    }
    for (int m = micro - 1; m >= 0; --m) {
      auto r = last.backward_loss(m, data[s * micro + m].labels, micro);
      first.backward(m, r.input_gradient);
    }
    first.step();
    last.step();
  }
  expect_close(whole, reference.model());
  EXPECT_EQ(first.version(), steps);
  EXPECT_EQ(first.versions_held(), 1u);
}

// A first stage holding no parameter (here the Flatten alone) builds no
// graph: its backward has nothing to do and must not fail ("element 0 of
// tensors does not require grad" before the fix), and the two stages still
// train as the whole model does.
TEST(stage_trainer, a_first_stage_without_parameters_takes_its_backward) {
  constexpr int steps = 2;
  auto whole = tiny_norm_model(tiny_norm::none);
  auto reference = tiny_norm_model(tiny_norm::none);
  stage_trainer first{whole.slice(0, 1), sgd(), stash_mode::stash};
  stage_trainer last{whole.slice(1, whole.size()), sgd(), stash_mode::stash};
  stage_trainer alone{reference.slice(0, reference.size()), sgd(), stash_mode::stash};
  auto gen = at::detail::createCPUGenerator(7);
  for (int s = 0; s < steps; ++s) {
    auto images = at::randn({8, 1, 28, 28}, gen);
    auto labels = at::randint(0, 10, {8}, gen);
    last.forward(s, first.forward(s, images, true), false);
    auto r = last.backward_loss(s, labels, 1);
    EXPECT_NO_THROW(first.backward(s, r.input_gradient));
    alone.forward(s, images, true);
    alone.backward_loss(s, labels, 1);
    first.step();
    last.step();
    alone.step();
  }
  expect_close(whole, reference);
}

namespace {

/// Runs forward(0), forward(1), backward(0), step, forward(2), backward(1)
/// and returns the backward of microbatch 1 and the gradients it produced.
std::pair<backward_result, std::vector<at::Tensor>> interleaved(stash_mode mode,
                                                                 const std::vector<microbatch_data>& d) {
  stage_trainer stage{head_model(), sgd(), mode};
  stage.forward(0, d[0].features, true);
  stage.forward(1, d[1].features, true);
  stage.backward_loss(0, d[0].labels, 1);
  stage.step();
  stage.forward(2, d[2].features, true);
  auto r = stage.backward_loss(1, d[1].labels, 1);
  std::vector<at::Tensor> grads;
  for (const auto& p : stage.layers().parameters())
    grads.push_back(p.grad().clone());
  return {r, grads};
}

/// Gradients of microbatch 1 under the initial weights (version 0).
std::vector<at::Tensor> version_zero_gradients(const microbatch_data& d) {
  auto model = head_model();
  auto loss = torch::nn::functional::cross_entropy(model.forward(d.features), d.labels);
  loss.backward();
  std::vector<at::Tensor> grads;
  for (const auto& p : model.parameters())
    grads.push_back(p.grad().clone());
  return grads;
}

} // namespace

// DESIGN invariant 4: with stashing, the backward of a microbatch uses the
// weight version its forward used, even after a step in between.
TEST(stage_trainer, stashing_backward_uses_the_forward_version) {
  auto d = make_data(3, 8);
  auto [r, grads] = interleaved(stash_mode::stash, d);
  EXPECT_EQ(r.forward_version, 0);
  EXPECT_EQ(r.backward_version, 0);
  auto expected = version_zero_gradients(d[1]);
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(grads[i], expected[i], 1e-5, 1e-7)) << i;
}

// Without stashing the same interleaving uses the newer weights: the versions
// and the gradients differ (so the test above can fail).
TEST(stage_trainer, without_stashing_backward_uses_newer_weights) {
  auto d = make_data(3, 8);
  auto [r, grads] = interleaved(stash_mode::none, d);
  EXPECT_EQ(r.forward_version, 0);
  EXPECT_EQ(r.backward_version, 1);
  auto expected = version_zero_gradients(d[1]);
  EXPECT_FALSE(torch::allclose(grads[0], expected[0], 1e-5, 1e-7));
}

// 1F1B in steady state with k microbatches in flight: the stage never holds
// more versions than the in-flight microbatches need, plus the current one.
TEST(stage_trainer, holds_no_more_versions_than_in_flight_microbatches_need) {
  constexpr int in_flight = 3, total = 12;
  auto d = make_data(total, 4);
  stage_trainer stage{head_model(), sgd(), stash_mode::stash};
  int next_forward = 0;
  for (int b = 0; b < total; ++b) {
    while (next_forward < total && next_forward < b + in_flight) {
      stage.forward(next_forward, d[next_forward].features, true);
      ++next_forward;
    }
    ASSERT_LE(stage.versions_held(), stage.in_flight() + 1);
    stage.backward_loss(b, d[b].labels, 1);
    stage.step();
    ASSERT_LE(stage.versions_held(), stage.in_flight() + 1);
  }
  EXPECT_EQ(stage.in_flight(), 0u);
  EXPECT_EQ(stage.versions_held(), 1u);
  EXPECT_EQ(stage.version(), total);
}

// A step that no in-flight microbatch needs the current version for updates
// its tensors in place; one that a microbatch in flight needs makes new ones
// (the stash above). Either way the same arithmetic: a stage kept out of
// place (vertical sync holding every version) ends with the same bits.
TEST(stage_trainer, a_version_nobody_needs_is_stepped_in_place_with_the_same_arithmetic) {
  auto d = make_data(4, 8);
  stage_trainer in_place{head_model(), sgd(), stash_mode::stash};
  stage_trainer out_of_place{head_model(), sgd(), stash_mode::stash};
  out_of_place.retain_from(0); // every version kept: each step writes new tensors
  auto storage = [](const stage_trainer& s) { return s.layers().parameters()[0].data_ptr(); };
  for (int b = 0; b < 3; ++b) {
    auto before = storage(in_place);
    auto before_kept = storage(out_of_place);
    for (auto* stage : {&in_place, &out_of_place}) {
      stage->forward(b, d[b].features, true);
      stage->backward_loss(b, d[b].labels, 1);
      stage->step();
    }
    EXPECT_EQ(storage(in_place), before);
    EXPECT_NE(storage(out_of_place), before_kept);
  }
  auto a = in_place.layers().parameters();
  auto b = out_of_place.layers().parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  // A microbatch in flight on the current version: the step writes new tensors.
  auto before = storage(in_place);
  in_place.forward(3, d[3].features, true);
  in_place.forward(4, d[0].features, true);
  in_place.backward_loss(3, d[3].labels, 1);
  in_place.step();
  EXPECT_NE(storage(in_place), before);
}

TEST(stage_trainer, refuses_unknown_or_repeated_microbatches) {
  auto d = make_data(1, 4);
  stage_trainer stage{head_model(), sgd(), stash_mode::stash};
  EXPECT_THROW(stage.backward_loss(5, d[0].labels, 1), baton::model::error);
  stage.forward(0, d[0].features, true);
  EXPECT_THROW(stage.forward(0, d[0].features, true), baton::model::error);
}

// Convolutions save their weight tensor itself for backward (linear layers
// save a view): stashing must hold for both.
TEST(stage_trainer, stashing_holds_for_convolutions) {
  const auto spec = spec_of("convnet", 3);
  auto gen = at::detail::createCPUGenerator(5);
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(at::randn({2, 1, 28, 28}, gen));
  auto run = [&](stash_mode mode) {
    stage_trainer stage{make_model(spec).slice(0, 5), sgd(), mode};
    auto ones = at::ones_like(stage.forward(0, inputs[0], true));
    stage.forward(1, inputs[1], true);
    stage.backward(0, ones);
    stage.step();
    stage.forward(2, inputs[2], true);
    auto r = stage.backward(1, ones);
    return std::make_pair(r, stage.layers().parameters()[0].grad().clone());
  };
  auto reference = make_model(spec).slice(0, 5);
  reference.forward(inputs[1]).backward(at::ones({2, 32, 14, 14}));
  auto expected = reference.parameters()[0].grad();
  auto [stashed, stashed_grad] = run(stash_mode::stash);
  EXPECT_EQ(stashed.backward_version, stashed.forward_version);
  EXPECT_TRUE(torch::allclose(stashed_grad, expected, 1e-5, 1e-6));
  auto [plain, plain_grad] = run(stash_mode::none);
  EXPECT_NE(plain.backward_version, plain.forward_version);
  EXPECT_FALSE(torch::allclose(plain_grad, expected, 1e-5, 1e-6));
}

// Many steps of 1F1B with 3 microbatches in flight against a by-hand
// PipeDream reference: the gradient of microbatch m is taken on a fresh model
// holding the weights of m's forward version, and SGD with momentum is
// applied by hand. Catches any drift that one step would not show.
TEST(stage_trainer, one_f_one_b_matches_a_by_hand_reference_over_many_steps) {
  constexpr int in_flight = 3, total = 15;
  auto d = make_data(total, 8);
  auto opt = sgd();
  stage_trainer stage{head_model(), opt, stash_mode::stash};
  // Reference state: weights per version, momentum buffers.
  std::vector<std::vector<at::Tensor>> weights{{}};
  for (const auto& p : head_model().parameters())
    weights[0].push_back(p.detach().clone());
  std::vector<at::Tensor> momentum;
  std::vector<int64_t> version_of(total);
  int next_forward = 0;
  for (int b = 0; b < total; ++b) {
    while (next_forward < total && next_forward < b + in_flight) {
      version_of[next_forward] = stage.version();
      stage.forward(next_forward, d[next_forward].features, true);
      ++next_forward;
    }
    stage.backward_loss(b, d[b].labels, 1);
    stage.step();
    // Reference: gradient on the forward's weights, then SGD by hand.
    auto model = head_model();
    auto params = model.parameters();
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i)
        params[i].copy_(weights[version_of[b]][i]);
    }
    torch::nn::functional::cross_entropy(model.forward(d[b].features), d[b].labels).backward();
    std::vector<at::Tensor> next;
    for (size_t i = 0; i < params.size(); ++i) {
      auto w = weights.back()[i];
      auto g = params[i].grad() + opt.weight_decay * w;
      if (momentum.size() <= i)
        momentum.push_back(g.clone());
      else
        momentum[i] = momentum[i] * opt.momentum + g;
      next.push_back(w - opt.lr * momentum[i]);
    }
    weights.push_back(next);
  }
  auto got = stage.layers().parameters();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], weights.back()[i], 1e-4, 1e-6)) << i;
}

// -- batch norm buffers (resnet18) ------------------------------------------------

namespace {

/// The first five layers of resnet18 (conv1 bn1 relu maxpool layer1_0): three
/// batch norms, 3x32x32 input.
layered_model resnet_slice() {
  return make_model(spec_of("resnet18", 11)).slice(0, 5);
}

at::Tensor images(int64_t batch, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn({batch, 3, 32, 32}, gen);
}

std::vector<at::Tensor> buffer_copies(const stage_trainer& stage) {
  std::vector<at::Tensor> out;
  for (const auto& b : stage.layers().buffers())
    out.push_back(b.clone());
  return out;
}

void expect_buffers_equal(const stage_trainer& stage, const std::vector<at::Tensor>& expected) {
  auto named = stage.layers().named_buffers();
  ASSERT_EQ(named.size(), expected.size());
  for (size_t i = 0; i < named.size(); ++i)
    EXPECT_TRUE(torch::equal(named[i].second, expected[i])) << named[i].first;
}

} // namespace

// Evaluation uses the running statistics, changes none of them, and leaves
// the stage in training mode.
TEST(stage_trainer, infer_runs_in_evaluation_mode_and_leaves_buffers_unchanged) {
  stage_trainer stage{resnet_slice(), sgd(), stash_mode::stash};
  stage.forward(0, images(4, 1), true); // running statistics away from 0 and 1
  const auto before = buffer_copies(stage);
  ASSERT_EQ(before.size(), 9u);
  const auto x = images(4, 2);
  const auto inferred = stage.infer(x);
  expect_buffers_equal(stage, before);
  for (const auto& layer : stage.layers().layers())
    EXPECT_TRUE(layer.module.ptr()->is_training()) << layer.name;
  // The same as an evaluation-mode forward of the same layers...
  auto reference = stage.layers();
  reference.train(false);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(inferred, reference.forward(x)));
  reference.train(true);
  // ...and not a training-mode one (batch statistics): the check can fail.
  EXPECT_FALSE(torch::allclose(inferred, reference.forward(x), 1e-4, 1e-5));
}

TEST(stage_trainer, training_forward_updates_running_statistics_once) {
  stage_trainer stage{resnet_slice(), sgd(), stash_mode::stash};
  const auto before = buffer_copies(stage);
  stage.forward(0, images(4, 1), true);
  auto named = stage.layers().named_buffers();
  ASSERT_EQ(named[0].first, "bn1.running_mean");
  EXPECT_FALSE(torch::equal(named[0].second, before[0]));
  EXPECT_EQ(named[2].first, "bn1.num_batches_tracked");
  EXPECT_EQ(named[2].second.item<int64_t>(), 1);
  // Backward and step leave the buffers alone.
  const auto after_forward = buffer_copies(stage);
  stage.backward(0, at::ones({4, 64, 8, 8}));
  stage.step();
  expect_buffers_equal(stage, after_forward);
}

// Without stashing the backward recomputes the forward: the running
// statistics must not count the microbatch a second time.
TEST(stage_trainer, recomputed_forward_leaves_buffers_as_after_the_forward) {
  stage_trainer stage{resnet_slice(), sgd(), stash_mode::none};
  stage.forward(0, images(4, 1), true);
  stage.forward(1, images(4, 2), true);
  const auto after_forwards = buffer_copies(stage);
  auto r = stage.backward(0, at::ones({4, 64, 8, 8}));
  EXPECT_EQ(r.backward_version, 0);
  expect_buffers_equal(stage, after_forwards);
  stage.step();
  stage.backward(1, at::ones({4, 64, 8, 8}));
  expect_buffers_equal(stage, after_forwards);
  EXPECT_EQ(stage.layers().named_buffers()[2].second.item<int64_t>(), 2);
}

// 1F1B with batch norm: later forwards update the running statistics in
// place while earlier microbatches wait for their backward; autograd must
// not reject that, and the backward still uses the forward's weights.
TEST(stage_trainer, batch_norm_stage_interleaves_forwards_and_backwards) {
  const auto x0 = images(4, 1), x1 = images(4, 2), x2 = images(4, 3);
  const auto ones = at::ones({4, 64, 8, 8});
  stage_trainer stage{resnet_slice(), sgd(), stash_mode::stash};
  stage.forward(0, x0, true);
  stage.forward(1, x1, true);
  stage.backward(0, ones);
  stage.step();
  stage.forward(2, x2, true);
  auto r = stage.backward(1, ones);
  EXPECT_EQ(r.forward_version, 0);
  EXPECT_EQ(r.backward_version, 0);
  // Reference: microbatch 1's gradient on the initial weights.
  auto reference = resnet_slice();
  reference.forward(x1).backward(ones);
  auto got = stage.layers().parameters();
  auto expected = reference.parameters();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].grad(), expected[i].grad(), 1e-4, 1e-6)) << i;
}

namespace {

/// The convnet cut after conv3, trained by two stages over `steps` steps of
/// 1F1B order (two microbatches in flight at the first stage, a step after
/// each backward), with conv3's weight gradient computed by the second
/// stage when `next` (weight_gradient: next); the parameters of both.
std::vector<at::Tensor> convnet_after_conv3(bool next, int steps) {
  const auto spec = spec_of("convnet", 3);
  auto whole = make_model(spec);
  const auto cut = static_cast<size_t>(whole.index_of("conv3") + 1);
  stage_trainer first{whole.slice(0, cut), sgd(), stash_mode::stash};
  stage_trainer second{whole.slice(cut, whole.size()), sgd(), stash_mode::stash};
  if (next) {
    first.hand_on_weight_gradient();
    second.take_weight_gradient(whole.layers()[cut - 1]);
  }
  auto gen = at::detail::createCPUGenerator(11);
  auto forward = [&](int64_t id) {
    boundary_io sent, received;
    auto x = at::randn({4, 1, 28, 28}, gen);
    auto y = first.forward(id, x, true, -1, next ? &sent : nullptr);
    received.previous_input = sent.last_input;
    auto out = second.forward(id, y, false, -1, next ? &received : nullptr);
    return at::sin(out) * 1e-3; // any gradient that depends on the output
  };
  std::map<int64_t, at::Tensor> gradients;
  gradients[0] = forward(0);
  for (int64_t id = 0; id < steps; ++id) {
    gradients[id + 1] = forward(id + 1);
    auto r = second.backward(id, gradients.at(id));
    second.step();
    first.backward(id, r.input_gradient);
    if (next) // the second message: the weight half after the input gradient
      first.add_last_weight_gradients(second.previous_weight_gradients(r));
    first.step();
  }
  return whole.parameters();
}

} // namespace

// weight_gradient: next moves where conv3's weight gradient is computed,
// not what it is: the weights after many 1F1B steps (stashed versions, the
// step in place and out of place) are the same bits as when the first stage
// computes it.
TEST(stage_trainer, a_boundary_weight_gradient_computed_by_the_next_stage_is_the_same_bits) {
  auto here = convnet_after_conv3(false, 6);
  auto next = convnet_after_conv3(true, 6);
  ASSERT_EQ(here.size(), next.size());
  for (size_t i = 0; i < here.size(); ++i)
    EXPECT_TRUE(torch::equal(here[i], next[i])) << "parameter " << i;
  // Trained, and finite (NaN equals nothing).
  const auto untrained = make_model(spec_of("convnet", 3)).parameters();
  EXPECT_FALSE(torch::equal(here[4], untrained[4])) << "conv3's weight";
  for (const auto& p : next)
    EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

TEST(stage_trainer, refuses_a_boundary_weight_gradient_it_cannot_move) {
  const auto spec = spec_of("convnet", 3);
  auto whole = make_model(spec);
  const auto relu1 = static_cast<size_t>(whole.index_of("relu1"));
  stage_trainer ends_in_relu{whole.slice(0, relu1 + 1), sgd(), stash_mode::stash};
  EXPECT_THROW(ends_in_relu.hand_on_weight_gradient(), error);
  stage_trainer second{whole.slice(relu1 + 1, whole.size()), sgd(), stash_mode::stash};
  EXPECT_THROW(second.take_weight_gradient(whole.layers()[relu1]), error);

  stage_trainer first{whole.slice(0, relu1), sgd(), stash_mode::stash};
  first.hand_on_weight_gradient();
  auto x = at::randn({2, 1, 28, 28});
  EXPECT_THROW(first.forward(0, x, true), error); // no boundary_io
  boundary_io io;
  auto y = first.forward(0, x, true, -1, &io);
  EXPECT_EQ(io.last_input.sizes(), x.sizes()); // conv1's input
  EXPECT_THROW(first.add_last_weight_gradients({}), error); // for no backward
  first.backward(0, at::ones_like(y));
  EXPECT_THROW(first.step(), error); // conv1's weight half is missing
  EXPECT_THROW(first.take_gradients(), error);
  EXPECT_THROW(first.add_last_weight_gradients({}), error);
  EXPECT_THROW(first.add_last_weight_gradients({at::zeros({3, 3})}), error);
  EXPECT_EQ(first.version(), 0); // refused before anything changed
  EXPECT_THROW(second.previous_weight_gradients({}), error); // takes none
  const auto& conv1 = whole.layers()[0];
  stage_trainer taker{whole.slice(relu1, whole.size()), sgd(), stash_mode::stash};
  taker.take_weight_gradient(conv1);
  boundary_io missing;
  EXPECT_THROW(taker.forward(0, y, false, -1, &missing), error);
}

namespace {

/// Stage 0 of the convnet cut after conv2 (weight_gradient: next) runs the
/// backward of microbatch 0, takes its gradients as a replica's share, then
/// runs the backward of microbatch 1; its group's step with that share comes
/// before that backward or while it waits for its weight half. The
/// gradients then taken, and the parameters.
std::vector<at::Tensor> group_step_around_a_waiting_backward(bool while_waiting) {
  auto whole = make_model(spec_of("convnet", 3));
  const auto cut = static_cast<size_t>(whole.index_of("conv2") + 1);
  stage_trainer first{whole.slice(0, cut), sgd(), stash_mode::stash};
  stage_trainer second{whole.slice(cut, whole.size()), sgd(), stash_mode::stash};
  first.hand_on_weight_gradient();
  second.take_weight_gradient(whole.layers()[cut - 1]);
  auto gen = at::detail::createCPUGenerator(5);
  std::vector<backward_result> downstream;
  for (int64_t id = 0; id < 2; ++id) {
    boundary_io sent, received;
    auto y = first.forward(id, at::randn({4, 1, 28, 28}, gen), true, -1, &sent);
    received.previous_input = sent.last_input;
    auto out = second.forward(id, y, false, -1, &received);
    downstream.push_back(second.backward(id, at::sin(out) * 1e-3));
  }
  first.backward(0, downstream[0].input_gradient);
  first.add_last_weight_gradients(second.previous_weight_gradients(downstream[0]));
  auto share = first.take_gradients();
  if (!while_waiting)
    first.step(share);
  first.backward(1, downstream[1].input_gradient);
  if (while_waiting)
    first.step(share);
  first.add_last_weight_gradients(second.previous_weight_gradients(downstream[1]));
  auto out = first.take_gradients();
  for (const auto& p : first.layers().parameters())
    out.push_back(p.detach());
  return out;
}

} // namespace

// A replica group's step may come while a backward waits for its weight
// half: static 1F1B's replicas run their last backwards without waiting for
// the group step before (the cool-down). The step leaves the gradients that
// backward accumulated; until 2026-12-06 it cleared them, and now and then
// the replicas' last step lost a microbatch's input half (a run's stage 0
// digest differed from the same stages' without the move).
TEST(stage_trainer, a_group_step_keeps_the_gradients_of_a_backward_waiting_for_its_half) {
  auto before = group_step_around_a_waiting_backward(false);
  auto waiting = group_step_around_a_waiting_backward(true);
  ASSERT_EQ(before.size(), waiting.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i], waiting[i])) << "tensor " << i;
  EXPECT_GT(before[0].abs().sum().item<double>(), 0) << "conv1's weight gradient";
}
