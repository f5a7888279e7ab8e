#include "model/core/layered_model.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/freezing.hpp"
#include "model/core/layer_listing.hpp"
#include "model/core/model_parts.hpp"
#include "model/core/pretrain.hpp"
#include "tests/support/tiny_model.hpp"

using namespace baton::model;
using baton::model::testing::spec_of;

namespace {

/// A fixed input batch from a local generator (the global one is not touched).
at::Tensor input(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen);
}

/// DESIGN invariant 1: for every split of `m` into 2 and into 3 contiguous
/// slices (empty slices included), running the slices one after another gives
/// the whole model's output bit for bit.
void expect_slices_compose(const layered_model& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  const at::Tensor whole = m.forward(x);
  const size_t n = m.size();
  for (size_t a = 0; a <= n; ++a) {
    auto two = m.slice(a, n).forward(m.slice(0, a).forward(x));
    EXPECT_TRUE(torch::equal(two, whole)) << "split at " << a;
    for (size_t b = a; b <= n; ++b) {
      auto three = m.slice(b, n).forward(m.slice(a, b).forward(m.slice(0, a).forward(x)));
      EXPECT_TRUE(torch::equal(three, whole)) << "splits at " << a << ", " << b;
    }
  }
}

} // namespace

TEST(layered_model, convnet_layers_shapes_and_parameter_count) {
  auto m = make_model(spec_of("convnet", 1));
  EXPECT_EQ(m.layer_names(),
            (std::vector<std::string>{"conv1", "relu1", "conv2", "relu2", "pool1", "conv3",
                                      "relu3", "conv4", "relu4", "pool2", "conv5", "relu5",
                                      "pool3", "flatten", "fc1", "relu6"}));
  EXPECT_EQ(m.index_of("pool2"), 9);
  EXPECT_EQ(m.index_of("fc2"), -1);
  // conv 1->32, 32->32, 32->64, 64->64, 64->128 (3x3 + bias); linear 1152->256.
  EXPECT_EQ(parameter_count(m), 320 + 9248 + 18496 + 36928 + 73856 + 295168);
  EXPECT_EQ(m.named_parameters().front().first, "conv1.weight");
  EXPECT_EQ(m.named_parameters().back().first, "fc1.bias");
  torch::NoGradGuard no_grad;
  EXPECT_EQ(m.forward(input({3, 1, 28, 28}, 1)).sizes(), (std::vector<int64_t>{3, 256}));
}

TEST(layered_model, convnet_slices_compose_bit_for_bit) {
  auto m = make_model(spec_of("convnet", 2));
  expect_slices_compose(m, input({4, 1, 28, 28}, 2));
}

TEST(layered_model, resnet18_layers_shapes_and_parameter_count) {
  auto m = make_model(spec_of("resnet18", 1));
  EXPECT_EQ(m.layer_names(),
            (std::vector<std::string>{"conv1", "bn1", "relu", "maxpool", "layer1_0", "layer1_1",
                                      "layer2_0", "layer2_1", "layer3_0", "layer3_1", "layer4_0",
                                      "layer4_1", "avgpool", "flatten"}));
  // torchvision's resnet18 has 11,689,512 parameters, 513,000 of them in fc.
  EXPECT_EQ(parameter_count(m), 11689512 - 513000);
  // Parameter keys follow torchvision's (layer2.0.downsample.0 -> layer2_0.downsample.0).
  auto params = m.named_parameters();
  auto has = [&](const std::string& key) {
    return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == key; });
  };
  EXPECT_TRUE(has("layer2_0.downsample.0.weight"));
  EXPECT_TRUE(has("layer2_0.downsample.1.bias"));
  EXPECT_FALSE(has("layer1_0.downsample.0.weight")); // same stride and channels
  EXPECT_EQ(backbone_features(spec_of("resnet18", 1)), 512);
  EXPECT_EQ(backbone_features(spec_of("convnet", 1)), 256);
  EXPECT_THROW(backbone_features(spec_of("head", 1)), error);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(m.forward(input({3, 3, 32, 32}, 1)).sizes(), (std::vector<int64_t>{3, 512}));
}

TEST(layered_model, resnet18_slices_compose_bit_for_bit_in_evaluation_mode) {
  auto m = make_model(spec_of("resnet18", 2));
  m.train(false);
  expect_slices_compose(m, input({2, 3, 32, 32}, 2));
}

TEST(layered_model, resnet18_initialisation_as_torchvision) {
  auto a = make_model(spec_of("resnet18", 5));
  EXPECT_EQ(weights_digest(a), weights_digest(make_model(spec_of("resnet18", 5))));
  EXPECT_NE(weights_digest(a), weights_digest(make_model(spec_of("resnet18", 6))));
  for (const auto& [name, p] : a.named_parameters()) {
    if (p.dim() == 4) { // convolutions: kaiming normal, fan_out, relu gain
      const auto fan_out = static_cast<double>(p.size(0) * p.size(2) * p.size(3));
      const double expected = std::sqrt(2.0 / fan_out);
      EXPECT_NEAR(p.mean().item<double>(), 0.0, 0.05 * expected) << name;
      EXPECT_NEAR(p.std().item<double>(), expected, 0.05 * expected) << name;
    } else if (name.find("weight") != std::string::npos) { // batch norm
      EXPECT_TRUE(torch::equal(p, torch::ones_like(p))) << name;
    } else {
      EXPECT_TRUE(torch::equal(p, torch::zeros_like(p))) << name;
    }
  }
  // Buffers: 3 per batch norm (20 of them), at their initial values.
  auto buffers = a.named_buffers();
  ASSERT_EQ(buffers.size(), 60u);
  EXPECT_EQ(buffers.front().first, "bn1.running_mean");
  for (const auto& [name, b] : buffers) {
    const bool variance = name.find("running_var") != std::string::npos;
    EXPECT_TRUE(torch::equal(b, variance ? torch::ones_like(b) : torch::zeros_like(b))) << name;
  }
  EXPECT_TRUE(make_model(spec_of("convnet", 1)).named_buffers().empty());
}

// The built-in models' max pooling runs ATen's channels-last kernel
// (builtin_models.cpp) and must give torch::max_pool2d's output and input
// gradient bit for bit: after a ReLU most windows tie at zero (the same
// index must win), a NaN wins its window; the convnet's 2x2 and
// resnet18's 3x3 / 2 padded, batched and in evaluation's NoGradGuard.
TEST(layered_model, max_pooling_is_torch_s_bit_for_bit) {
  using kind = layer_declaration::kind;
  for (auto [kernel, stride, padding] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}}) {
    model_declaration d;
    d.layers = {{"pool", kind::max_pool, 0, 0, kernel, stride, padding}};
    auto pool = build_layers(d).front().module;
    auto x = torch::relu(input({4, 8, 14, 14}, 5));
    x[1][2][3][4] = std::numeric_limits<float>::quiet_NaN();
    const auto g = input({4, 8, 7, 7}, 6);
    auto ours = x.clone().requires_grad_();
    auto plain = x.clone().requires_grad_();
    const auto y = pool.forward(ours);
    const auto expected = torch::max_pool2d(plain, kernel, stride, padding);
    EXPECT_TRUE(torch::equal(y.nan_to_num(-1), expected.nan_to_num(-1))) << kernel;
    EXPECT_TRUE(y.is_contiguous());
    y.backward(g);
    expected.backward(g);
    EXPECT_TRUE(torch::equal(ours.grad(), plain.grad())) << kernel;
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(pool.forward(x).nan_to_num(-1), expected.nan_to_num(-1)));
    EXPECT_TRUE(torch::equal(pool.forward(x[0]), torch::max_pool2d(x[0], kernel, stride, padding)));
  }
}

// The convnet's layers are each followed by a ReLU: He's normal over fan_in, so that the
// stack keeps its input's scale (PyTorch's default kept a sixth per layer, and SGD at
// configs/pipeline.yaml's lr sat at a loss of 2.30 for ~150 steps).
TEST(layered_model, convnet_initialisation_is_he_s_for_relu_layers) {
  for (const char* name : {"convnet", "convnet_wide"}) {
    auto spec = spec_of(name, 5);
    spec.wide_features = 512;
    auto a = make_model(spec);
    EXPECT_EQ(weights_digest(a), weights_digest(make_model(spec))) << name;
    for (const auto& [param, p] : a.named_parameters()) {
      if (p.dim() >= 2) {
        const auto fan_in = static_cast<double>(p[0].numel());
        const double expected = std::sqrt(2.0 / fan_in);
        // Four standard errors of the sample's mean and deviation (conv1: 288 weights).
        const auto n = static_cast<double>(p.numel());
        EXPECT_NEAR(p.mean().item<double>(), 0.0, 4 * expected / std::sqrt(n))
          << name << " " << param;
        EXPECT_NEAR(p.std().item<double>(), expected, 4 * expected / std::sqrt(2 * n))
          << name << " " << param;
      } else {
        EXPECT_TRUE(torch::equal(p, torch::zeros_like(p))) << name << " " << param;
      }
    }
  }
}

TEST(layered_model, pretrain_model_classifier_takes_the_backbone_features) {
  auto resnet = make_pretrain_model(spec_of("resnet18", 3), 10);
  EXPECT_EQ(resnet.layer_names().back(), "fc2");
  EXPECT_EQ(resnet.named_parameters().back().first, "fc2.bias");
  EXPECT_EQ(parameter_count(resnet), 11689512 - 513000 + 512 * 10 + 10);
  resnet.train(false);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(resnet.forward(input({2, 3, 32, 32}, 3)).sizes(), (std::vector<int64_t>{2, 10}));
  auto convnet = make_pretrain_model(spec_of("convnet", 3), 10);
  EXPECT_EQ(convnet.forward(input({2, 1, 28, 28}, 3)).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(layered_model, a_declared_model_lists_the_layers_make_model_builds) {
  for (const char* name : {"convnet", "convnet_wide", "resnet18", "head", "classifier", "mlp"}) {
    auto spec = spec_of(name, 4);
    spec.wide_features = 64;
    spec.in_height = spec.in_width = 16; // the mlp's first layer over 256 inputs
    const auto built = make_model(spec);
    const auto listed = list_layers(spec, with_features::yes);
    EXPECT_EQ(listed.names, built.layer_names()) << name;
    EXPECT_EQ(list_layers(spec).features, 0) << name; // not asked
    EXPECT_TRUE(listed.ties.empty() && layer_ties(built).empty()) << name;
    EXPECT_EQ(listed.batch_dependent, batch_dependent_layers(built)) << name;
    if (std::string{name} == "head" || std::string{name} == "classifier" ||
        std::string{name} == "mlp") {
      EXPECT_EQ(listed.features, 0) << name; // not backbones
      EXPECT_NE(listed.features_error.find("is not a backbone"), std::string::npos) << name;
      continue;
    }
    EXPECT_EQ(backbone_features(spec), output_features(built, spec)) << name;
    EXPECT_EQ(listed.features, output_features(built, spec)) << name;
    const auto pretrain = make_pretrain_model(spec, 7);
    EXPECT_EQ(list_pretrain_layers(spec, 7).names, pretrain.layer_names()) << name;
    EXPECT_EQ(list_pretrain_layers(spec, 7).batch_dependent, batch_dependent_layers(pretrain))
      << name;
  }
  auto small = spec_of("convnet", 4);
  small.in_height = 7;
  EXPECT_THROW(list_layers(small), error); // refused as make_model refuses it
  EXPECT_THROW(list_layers(spec_of("lenet", 4)), error);
}

TEST(layered_model, head_and_classifier) {
  auto head = make_model(spec_of("head", 3, 4));
  EXPECT_EQ(head.layer_names(), (std::vector<std::string>{"fc1", "relu1", "fc2"}));
  EXPECT_EQ(parameter_count(head), 256 * 128 + 128 + 128 * 4 + 4);
  expect_slices_compose(head, input({5, 256}, 3));
  auto classifier = make_model(spec_of("classifier", 3, 10));
  EXPECT_EQ(classifier.layer_names(), std::vector<std::string>{"fc2"});
  EXPECT_EQ(parameter_count(classifier), 2570);
  model_spec wide = spec_of("classifier", 3, 10);
  wide.features = 512;
  EXPECT_EQ(parameter_count(make_model(wide)), 5130);
  wide.features = 0;
  EXPECT_THROW(make_model(wide), error);
}

TEST(layered_model, mlp_slices_compose_and_has_20m_parameters) {
  auto m = make_model(spec_of("mlp", 4));
  EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"flatten", "fc1", "bn1", "relu1", "fc2",
                                                       "bn2", "relu2", "fc3"}));
  // No biases; batch norm keeps its affine weight and bias (2 x 4096 per layer).
  EXPECT_EQ(parameter_count(m), 784 * 4096 + 4096 * 4096 + 4096 * 10 + 2 * 2 * 4096);
  for (const auto& [name, p] : m.named_parameters())
    EXPECT_FALSE(name.rfind("fc", 0) == 0 && name.find("bias") != std::string::npos) << name;
  expect_slices_compose(m, input({6, 1, 28, 28}, 4));
  // Without running statistics, evaluation mode computes the same function.
  torch::NoGradGuard no_grad;
  auto x = input({6, 1, 28, 28}, 5);
  auto trained = m.forward(x);
  m.train(false);
  EXPECT_TRUE(torch::equal(m.forward(x), trained));
}

TEST(layered_model, convnet_wide_adds_fc1b) {
  model_spec spec = spec_of("convnet_wide", 1);
  spec.wide_features = 64;
  auto m = make_model(spec);
  auto names = m.layer_names();
  ASSERT_EQ(names.size(), 18u);
  EXPECT_EQ(std::vector<std::string>(names.end() - 4, names.end()),
            (std::vector<std::string>{"fc1", "relu6", "fc1b", "relu7"}));
  EXPECT_EQ(parameter_count(m),
            320 + 9248 + 18496 + 36928 + 73856 + (1152 * 64 + 64) + (64 * 256 + 256));
  torch::NoGradGuard no_grad;
  EXPECT_EQ(m.forward(input({2, 1, 28, 28}, 1)).sizes(), (std::vector<int64_t>{2, 256}));
}

TEST(layered_model, initialisation_depends_on_the_seed_only) {
  torch::manual_seed(1);
  auto a = make_model(spec_of("convnet", 7));
  torch::manual_seed(2);
  auto b = make_model(spec_of("convnet", 7));
  auto c = make_model(spec_of("convnet", 8));
  EXPECT_EQ(weights_digest(a), weights_digest(b));
  EXPECT_NE(weights_digest(a), weights_digest(c));
  // Built concurrently in several threads (as actors do), still the same.
  std::vector<std::string> digests(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < digests.size(); ++i)
    threads.emplace_back([&digests, i] { digests[i] = weights_digest(make_model(spec_of("convnet", 7))); });
  for (auto& t : threads)
    t.join();
  for (const auto& d : digests)
    EXPECT_EQ(d, weights_digest(a));
  // A sane scale: He's sqrt(2 / fan_in), not all zeros.
  auto fc1 = a.named_parameters()[10].second; // fc1.weight
  EXPECT_NEAR(fc1.std().item<double>(), std::sqrt(2.0 / 1152.0), 0.05 * std::sqrt(2.0 / 1152.0));
}

TEST(layered_model, digest_tracks_every_weight) {
  auto m = make_model(spec_of("head", 1));
  const std::string before = weights_digest(m);
  ASSERT_EQ(before.size(), 64u);
  EXPECT_EQ(before.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto last = m.named_parameters().back().second; // fc2.bias
  torch::NoGradGuard no_grad;
  const float old = last[3].item<float>();
  last[3].fill_(old + 1e-3f);
  EXPECT_NE(weights_digest(m), before);
  last[3].fill_(old);
  EXPECT_EQ(weights_digest(m), before);
}

TEST(layered_model, slices_share_parameters) {
  auto m = make_model(spec_of("convnet", 1));
  auto tail = m.slice(m.index_of("fc1"), m.size());
  EXPECT_EQ(tail.layer_names(), (std::vector<std::string>{"fc1", "relu6"}));
  const std::string before = weights_digest(m);
  {
    torch::NoGradGuard no_grad;
    tail.named_parameters()[1].second.fill_(1.0); // fc1.bias
  }
  EXPECT_NE(weights_digest(m), before);
  EXPECT_EQ(m.slice(0, 0).size(), 0u);
  EXPECT_THROW(m.slice(3, 2), c10::Error);
  EXPECT_THROW(m.slice(0, 17), c10::Error);
}

TEST(layered_model, trainable_switch) {
  auto m = make_model(spec_of("head", 1));
  for (const auto& p : m.parameters())
    EXPECT_TRUE(p.requires_grad());
  m.set_trainable(false);
  for (const auto& p : m.parameters())
    EXPECT_FALSE(p.requires_grad());
  m.train(false);
  for (const auto& layer : m.layers())
    EXPECT_FALSE(layer.module.ptr()->is_training());
}

TEST(layered_model, unknown_model_is_an_error) {
  EXPECT_THROW(make_model(spec_of("resnet1000", 1)), error);
  model_spec script = spec_of("torchscript", 1);
  script.path = "/nonexistent/model.pt";
  try {
    make_model(script);
    ADD_FAILURE() << "expected model::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.pt"), std::string::npos);
  }
  EXPECT_THROW(make_model(spec_of("head", 1, 0)), error);
}

TEST(layered_model, convnet_forward_timing_one_thread) {
  // Not an assertion on time (benchmarks do that): prints the forward time
  // of one thread, and checks batch independence of the output.
  auto m = make_model(spec_of("convnet", 1));
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  auto x = input({64, 1, 28, 28}, 9);
  auto y = m.forward(x); // warm-up
  auto start = std::chrono::steady_clock::now();
  constexpr int repeats = 5;
  for (int i = 0; i < repeats; ++i)
    y = m.forward(x);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count() / repeats;
  at::set_num_threads(threads);
  std::cout << "[ info ] convnet forward, batch 64, 1 thread: " << ms << " ms\n";
  const auto part = m.forward(x.slice(0, 0, 8));
  // Outputs of order 10 (He's initialisation): float rounding of 1e-6 of them.
  EXPECT_TRUE(torch::allclose(part, y.slice(0, 0, 8), 1e-5, 1e-5))
    << "largest difference " << (part - y.slice(0, 0, 8)).abs().max().item<double>()
    << " of outputs up to " << y.abs().max().item<double>();
}

// -- tied weights (DESIGN invariant 14) -------------------------------------------

TEST(layered_model, a_tensor_two_layers_share_is_one_parameter) {
  const auto m = baton::model::testing::tied_model();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : m.named_parameters())
    names.push_back(name);
  // fc2b's weight is fc2's: listed once, under the first layer holding it.
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                             "fc2b.bias", "fc3.weight", "fc3.bias"}));
  EXPECT_EQ(m.parameters().size(), 7u);
  EXPECT_EQ(m.named_state().size(), 7u);
  EXPECT_EQ(parameter_count(m), 784 * 32 + 32 + 32 * 32 + 32 + 32 + 32 * 10 + 10);
  // A slice holding only the later layer names the tensor there.
  const auto tail = m.slice(m.index_of("fc2b"), m.size());
  EXPECT_EQ(tail.named_parameters().front().first, "fc2b.weight");
}
