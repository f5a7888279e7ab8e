// model/core/optimizer.hpp against python3-torch's torch.optim: a small
// network and its data with fixed initial weights, written by Python, trained
// a few epochs by torch.optim (SGD with Nesterov and a step schedule; Adam
// with L2 and clipping; AdamW with a cosine schedule after a linear warm-up
// and clip_grad_norm_) and by baton's step functions; the weights must agree
// to float tolerance (torch.allclose, rtol 1e-6, atol 1e-7) and the learning
// rates to double's. Skips without a python3 that imports torch.

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/optimizer.hpp"
#include "tests/support/python_files.hpp"

namespace baton::model {
namespace {

constexpr int64_t samples = 32, batch = 8, epochs = 4, steps_per_epoch = samples / batch;

/// Three runs of the same network: torch.optim's, their lrs per step.
constexpr const char* make_runs_py = R"PY(import math, struct, sys
import torch
out = sys.argv[1]
torch.manual_seed(0)
shapes = {"w1": (5, 6), "b1": (5,), "w2": (3, 5), "b2": (3,)}
init = {k: torch.randn(*s) * 0.5 for k, s in shapes.items()}
x = torch.randn(32, 6)
y = torch.randint(0, 3, (32,))

def write_floats(name, t):
    v = t.detach().contiguous().view(-1).tolist()
    open(out + "/" + name, "wb").write(struct.pack("%df" % len(v), *v))

for k, t in init.items():
    write_floats("init_" + k, t)
write_floats("x", x)
open(out + "/y", "wb").write(struct.pack("32q", *y.tolist()))

def forward(p, xb):
    h = torch.tanh(xb @ p["w1"].t() + p["b1"])
    return h @ p["w2"].t() + p["b2"]

def run(case, make_optimizer, make_scheduler, per_epoch, clip):
    p = {k: t.clone().requires_grad_(True) for k, t in init.items()}
    opt = make_optimizer(list(p.values()))
    sched = make_scheduler(opt)
    lrs = []
    for epoch in range(4):
        for s in range(4):
            xb, yb = x[s * 8:(s + 1) * 8], y[s * 8:(s + 1) * 8]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward(p, xb), yb).backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            if sched is not None and not per_epoch:
                sched.step()
        if sched is not None and per_epoch:
            sched.step()
    for k, t in p.items():
        write_floats(case + "_" + k, t)
    open(out + "/" + case + "_lr", "wb").write(struct.pack("%dd" % len(lrs), *lrs))

S = torch.optim.lr_scheduler
# AdamW, one epoch (4 steps) of linear warm-up from lr/4, then cosine to 1e-4.
run("adamw",
    lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-7, weight_decay=0.05),
    lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=3),
                                 S.CosineAnnealingLR(o, T_max=12, eta_min=1e-4)], milestones=[4]),
    False, 0.5)
run("adam", lambda ps: torch.optim.Adam(ps, lr=0.005, weight_decay=0.001), lambda o: None,
    False, 1.0)
run("sgd",
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.001),
    lambda o: S.StepLR(o, step_size=2, gamma=0.5), True, 0)
)PY";

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

at::Tensor read_tensor(const std::string& path, std::vector<int64_t> shape, at::ScalarType type) {
  const auto bytes = read_file_bytes(path);
  auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
  EXPECT_EQ(static_cast<size_t>(t.nbytes()), bytes.size()) << path;
  std::memcpy(t.data_ptr(), bytes.data(), std::min(bytes.size(), static_cast<size_t>(t.nbytes())));
  return t;
}

std::vector<double> read_doubles(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  std::vector<double> out(bytes.size() / sizeof(double));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
  {"w1", {5, 6}}, {"b1", {5}}, {"w2", {3, 5}}, {"b2", {3}}};

class optimizer_vs_torch : public baton::testing::python_files<optimizer_vs_torch> {
public:
  static constexpr const char* scratch_name = "optimizer-vs-torch";
  static constexpr const char* script = make_runs_py;

protected:
  /// Trains the network as the script does with `o`; in place or out of place.
  static std::vector<at::Tensor> train(const optimizer_spec& o, bool in_place,
                                       std::vector<double>* lrs = nullptr) {
    std::vector<at::Tensor> p;
    std::vector<parameter_state> state;
    for (const auto& [name, shape] : shapes) {
      p.push_back(read_tensor(path("init_" + name), shape, at::kFloat).requires_grad_(true));
      state.push_back(make_parameter_state(p.back(), o));
    }
    const auto x = read_tensor(path("x"), {samples, 6}, at::kFloat);
    const auto y = read_tensor(path("y"), {samples}, at::kLong);
    int64_t step = 0;
    for (int64_t epoch = 0; epoch < epochs; ++epoch)
      for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
        const auto xb = x.narrow(0, s * batch, batch), yb = y.narrow(0, s * batch, batch);
        const auto h = torch::tanh(xb.matmul(p[0].t()) + p[1]);
        const auto loss = torch::nn::functional::cross_entropy(h.matmul(p[2].t()) + p[3], yb);
        std::vector<at::Tensor> grads = torch::autograd::grad({loss}, p);
        grads = clip_grad_norm(grads, o.clip_grad_norm);
        const double lr = lr_at(o, step, steps_per_epoch, epochs);
        if (lrs != nullptr)
          lrs->push_back(lr);
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < p.size(); ++i) {
          auto data = p[i].detach();
          if (in_place)
            optimizer_step_in_place(data, grads[i], state[i], o, lr);
          else
            data.copy_(optimizer_step_out_of_place(data, grads[i], state[i], o, lr));
        }
      }
    for (auto& t : p)
      t = t.detach().clone();
    return p;
  }

  /// baton's run equals torch.optim's (weights as torch.allclose with rtol
  /// 1e-6 and atol 1e-7, lrs to 1e-12), and in place equals out of place
  /// bit for bit.
  static void check(const std::string& run, const optimizer_spec& o) {
    std::vector<double> lrs;
    const auto out_of_place = train(o, false, &lrs);
    const auto in_place = train(o, true);
    const auto torch_lrs = read_doubles(path(run + "_lr"));
    ASSERT_EQ(lrs.size(), torch_lrs.size());
    for (size_t i = 0; i < lrs.size(); ++i)
      EXPECT_NEAR(lrs[i], torch_lrs[i], 1e-12 * torch_lrs[i]) << run << " lr of step " << i;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto expected = read_tensor(path(run + "_" + shapes[i].first), shapes[i].second,
                                        at::kFloat);
      // torch.allclose's test: |baton - torch| <= 1e-7 + 1e-6 |torch|.
      EXPECT_TRUE(torch::allclose(out_of_place[i], expected, 1e-6, 1e-7))
        << run << " " << shapes[i].first << ": largest difference "
        << (out_of_place[i] - expected).abs().max().item<double>() << "\nbaton "
        << out_of_place[i] << "\ntorch " << expected;
      EXPECT_TRUE(torch::equal(in_place[i], out_of_place[i])) << run << " " << shapes[i].first;
      EXPECT_FALSE(torch::equal(expected, read_tensor(path("init_" + shapes[i].first),
                                                      shapes[i].second, at::kFloat)))
        << run << ": the weights did not move";
    }
  }
};

TEST_F(optimizer_vs_torch, adamw_with_warmup_cosine_and_clipping_equals_torch_optim) {
  optimizer_spec o;
  o.name = "adamw";
  o.lr = 0.01;
  o.momentum = 0;
  o.beta2 = 0.99;
  o.eps = 1e-7;
  o.weight_decay = 0.05;
  o.schedule = "cosine";
  o.warmup_epochs = 1;
  o.min_lr = 1e-4;
  o.clip_grad_norm = 0.5;
  check("adamw", o);
}

TEST_F(optimizer_vs_torch, adam_with_l2_and_clipping_equals_torch_optim) {
  optimizer_spec o;
  o.name = "adam";
  o.lr = 0.005;
  o.momentum = 0;
  o.weight_decay = 0.001;
  o.clip_grad_norm = 1.0;
  check("adam", o);
}

TEST_F(optimizer_vs_torch, sgd_with_nesterov_and_a_step_schedule_equals_torch_optim) {
  optimizer_spec o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 0.001;
  o.schedule = "step";
  o.step_epochs = 2;
  o.gamma = 0.5;
  check("sgd", o);
}

// -- without python ------------------------------------------------------------------

// Plain SGD goes through the fused step that every strategy used before: the
// same bits as sgd_step_out_of_place with `first` on the first step.
TEST(optimizer, sgd_steps_are_the_fused_sgd_steps_bit_for_bit) {
  torch::manual_seed(3);
  optimizer_spec o{0.05, 0.9, 1e-4};
  auto p = torch::randn({300});
  auto momentum = torch::zeros_like(p);
  auto state = make_parameter_state(p, o);
  auto q = p.clone();
  for (int step = 0; step < 3; ++step) {
    const auto g = torch::randn({300});
    p = sgd_step_out_of_place(p, g, momentum, o, step == 0);
    q = optimizer_step_out_of_place(q, g, state, o, o.lr);
  }
  EXPECT_TRUE(torch::equal(p, q));
  EXPECT_TRUE(torch::equal(momentum, state.first));
  EXPECT_EQ(state.steps, 3);
}

// Two workers' mean taken in the step's pass, given in pieces that split a
// parameter anywhere, leaves the weights and momentum of the step with the
// mean in memory, bit for bit, from the first step on; a step that does not
// fuse is refused untouched.
TEST(optimizer, an_sgd_step_of_a_mean_in_pieces_is_the_step_of_the_mean_bit_for_bit) {
  torch::manual_seed(4);
  for (int32_t workers : {2, 3}) {
    optimizer_spec o{0.05, 0.9, 1e-4};
    auto p = torch::randn({10, 30});
    auto q = p.clone();
    auto state = make_parameter_state(p, o);
    auto fused = make_parameter_state(q, o);
    for (int step = 0; step < 3; ++step) {
      const auto a = torch::randn({300});
      const auto b = torch::randn({300});
      optimizer_step_in_place(p, (a + b).div_(workers).view({10, 30}), state, o, 0.04);
      std::vector<mean_piece> pieces{{0, a.narrow(0, 0, 7), b.narrow(0, 0, 7)},
                                     {7, a.narrow(0, 7, 293), b.narrow(0, 7, 293)}};
      ASSERT_TRUE(sgd_step_of_mean_in_place(q, pieces, workers, fused, o, 0.04));
    }
    EXPECT_TRUE(torch::equal(p, q));
    EXPECT_TRUE(torch::equal(state.first, fused.first));
    EXPECT_EQ(fused.steps, 3);
    // Out of place, as a parameter shard steps: `q` stays, the result is the
    // out-of-place step's.
    const auto a = torch::randn({300});
    const auto b = torch::randn({300});
    const auto expected =
      optimizer_step_out_of_place(p, (a + b).div_(workers).view({10, 30}), state, o, 0.04);
    const auto before = q.clone();
    auto next = torch::empty_like(q);
    ASSERT_TRUE(sgd_step_of_mean_in_place(q, {{0, a, b}}, workers, fused, o, 0.04, &next));
    EXPECT_TRUE(torch::equal(next, expected));
    EXPECT_TRUE(torch::equal(q, before));
    EXPECT_TRUE(torch::equal(state.first, fused.first));
  }
  optimizer_spec adam{0.001};
  adam.name = "adam";
  auto w = torch::zeros({4});
  auto state = make_parameter_state(w, adam);
  const auto g = torch::ones({4});
  EXPECT_FALSE(sgd_step_of_mean_in_place(w, {{0, g, g}}, 2, state, adam, 0.001));
  optimizer_spec sgd{0.1, 0.9};
  state = make_parameter_state(w, sgd);
  EXPECT_FALSE(sgd_step_of_mean_in_place(w, {{1, g.narrow(0, 0, 3), g.narrow(0, 0, 3)}}, 2,
                                         state, sgd, 0.1)); // element 0 not covered
  EXPECT_TRUE(torch::equal(w, torch::zeros({4})));
  EXPECT_EQ(state.steps, 0);
}

TEST(optimizer, the_schedule_warms_up_decays_and_keeps_data_parallel_scaling) {
  optimizer_spec o;
  o.lr = 0.1;
  EXPECT_EQ(lr_at(o, 7, 10, 3), 0.1);
  o.warmup_epochs = 1;
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 10, 3), 0.01); // (step + 1) / W of the peak
  EXPECT_DOUBLE_EQ(lr_at(o, 9, 10, 3), 0.1);
  // With lr_scaling's peak: from lr to the peak, as data-parallel always did.
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 10, 3, 0.4), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 5, 10, 3, 0.4), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(o, 10, 10, 3, 0.4), 0.4);
  o.schedule = "cosine";
  o.min_lr = 0.02;
  EXPECT_DOUBLE_EQ(lr_at(o, 10, 10, 3), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 20, 10, 3), 0.06);
  o.warmup_epochs = 0;
  o.schedule = "step";
  o.step_epochs = 1;
  o.gamma = 0.5;
  EXPECT_DOUBLE_EQ(lr_at(o, 25, 10, 3), 0.025);
  EXPECT_THROW(lr_at(o, 0, 0, 3), error);
}

TEST(optimizer, bad_settings_are_refused_with_the_reason) {
  optimizer_spec o;
  o.name = "lamb";
  EXPECT_THROW(check_optimizer(o), error);
  o.name = "adamw";
  o.beta2 = 1;
  EXPECT_THROW(check_optimizer(o), error);
  o = optimizer_spec{};
  o.nesterov = true;
  o.momentum = 0;
  EXPECT_THROW(check_optimizer(o), error);
  o = optimizer_spec{};
  o.schedule = "exponential";
  EXPECT_THROW(check_optimizer(o), error);
}

TEST(optimizer, clipping_scales_every_gradient_by_one_factor) {
  const std::vector<at::Tensor> g{torch::full({4}, 3.0), at::Tensor(), torch::full({1}, 4.0)};
  const auto clipped = clip_grad_norm(g, 5.0); // norm sqrt(36 + 16) > 5
  const double norm = std::sqrt(36.0 + 16.0);
  EXPECT_NEAR(clipped[0][0].item<double>(), 3.0 * 5.0 / (norm + 1e-6), 1e-6);
  EXPECT_FALSE(clipped[1].defined());
  EXPECT_TRUE(torch::equal(clip_grad_norm(g, 100.0)[0], g[0]));
  EXPECT_EQ(g[0][0].item<double>(), 3.0); // inputs untouched
}

} // namespace
} // namespace baton::model
