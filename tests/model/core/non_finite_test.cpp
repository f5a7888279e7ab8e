// Where a non-finite training loss came from (model/core/non_finite.hpp,
// issue 32 item 11): the first layer whose output is NaN or inf, and
// whether its input and parameters were finite, so that a model's own NaN
// is not blamed on the learning rate.

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/layered_model.hpp"
#include "model/core/non_finite.hpp"
#include "tests/support/text.hpp"

using namespace baton::model;
using baton::testing::contains;

namespace {

named_layer linear(const std::string& name, int64_t in, int64_t out) {
  torch::manual_seed(0);
  return {name, torch::nn::AnyModule(torch::nn::Linear(in, out))};
}

named_layer function(const std::string& name, std::function<at::Tensor(at::Tensor)> f) {
  return {name, torch::nn::AnyModule(torch::nn::Functional(std::move(f)))};
}

} // namespace

TEST(non_finite, names_the_first_layer_and_its_own_arithmetic) {
  layered_model m({linear("fc1", 4, 4),
                   function("log", [](at::Tensor x) { return (x - 1e6).log(); }),
                   linear("fc2", 4, 2)});
  const auto why = non_finite_origin(m, torch::ones({3, 4}));
  EXPECT_TRUE(contains(why, "layer 'log' (2 of 3) is the first whose output is not finite (NaN), "
                            "given a finite input; it has no parameters: its own arithmetic"))
    << why;
}

TEST(non_finite, says_when_the_weights_diverged) {
  layered_model m({linear("fc1", 4, 4), linear("fc2", 4, 2)});
  {
    torch::NoGradGuard no_grad;
    m.layers()[1].module.ptr()->parameters()[0][0][0] = std::numeric_limits<float>::quiet_NaN();
  }
  auto why = non_finite_origin(m, torch::ones({3, 4}));
  EXPECT_TRUE(contains(why, "layer 'fc2' (2 of 2) is the first whose output is not finite (NaN)"))
    << why;
  EXPECT_TRUE(contains(why, "its parameters are not finite (NaN): the weights diverged")) << why;
  layered_model grown({linear("fc1", 4, 4)});
  {
    torch::NoGradGuard no_grad;
    grown.layers()[0].module.ptr()->parameters()[0].fill_(1e30);
  }
  why = non_finite_origin(grown, torch::ones({3, 4}) * 1e10);
  EXPECT_TRUE(contains(why, "(inf)")) << why;
  EXPECT_TRUE(contains(why, "have grown to |w| = 1e+30: the weights are diverging")) << why;
}

TEST(non_finite, an_input_that_is_not_finite_is_from_before_the_layers) {
  layered_model m({linear("fc1", 4, 2)});
  auto input = torch::ones({2, 4});
  input[1][2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(contains(non_finite_origin(m, input), "the input of these layers is not finite "
                                                    "already (inf)"));
  EXPECT_TRUE(contains(non_finite_origin(std::vector<at::Tensor>{torch::ones({2})}, input),
                       "the input is not finite already (inf)"));
}

TEST(non_finite, batch_norm_statistics_are_put_back) {
  layered_model m({{"bn", torch::nn::AnyModule(torch::nn::BatchNorm1d(4))},
                   function("log", [](at::Tensor x) { return x.log(); })});
  m.train(true);
  const auto before = m.buffers()[0].clone();
  const auto why = non_finite_origin(m, torch::randn({8, 4}) + 3);
  EXPECT_TRUE(contains(why, "layer 'log' (2 of 2)")) << why;
  EXPECT_TRUE(torch::equal(m.buffers()[0], before));
}

TEST(non_finite, a_watch_searches_the_first_non_finite_loss_only) {
  layered_model m({linear("fc1", 4, 2)});
  non_finite_watch watch{"head 'a'"};
  watch.check(0.5, m, torch::ones({2, 4}));
  EXPECT_EQ(watch.origin(), "");
  watch.check(std::numeric_limits<double>::quiet_NaN(), m, torch::ones({2, 4}));
  EXPECT_TRUE(contains(watch.origin(), "every layer's output is finite")) << watch.origin();
  auto nan_input = torch::ones({2, 4}) * std::numeric_limits<float>::quiet_NaN();
  watch.check(std::numeric_limits<double>::quiet_NaN(), m, nan_input);
  EXPECT_TRUE(contains(watch.origin(), "every layer's output is finite")) << watch.origin();
}
