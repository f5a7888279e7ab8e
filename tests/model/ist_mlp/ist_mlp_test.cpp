// model_spec "ist_mlp" (model/ist_mlp/mlp.hpp): IST's network
// (model/ist_mlp/network.hpp) as a layered_model, so that the data-parallel
// mode trains the same network as job: ist. Its parameters and forward equal
// ist::make_network / ist::forward bit for bit.

#include <cstring>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/core/error.hpp"
#include "model/core/freezing.hpp"
#include "model/ist_mlp/mlp.hpp"
#include "model/ist_mlp/network.hpp"
#include "model/core/layered_model.hpp"

using namespace baton::model;
using namespace baton::model::ist;

namespace {

model_spec mlp_model_spec(std::vector<int64_t> hidden, uint64_t seed) {
  model_spec spec;
  spec.name = "ist_mlp";
  spec.hidden = std::move(hidden);
  spec.classes = 10;
  spec.seed = seed;
  return spec;
}

ist::shape shape_of(const model_spec& spec) {
  ist::shape s;
  s.inputs = 28 * 28 * spec.in_channels;
  s.hidden = spec.hidden;
  s.classes = spec.classes;
  return s;
}

/// Bitwise equality of two float tensors (same shape, same bytes).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
    return false;
  const auto x = a.detach().contiguous();
  const auto y = b.detach().contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

/// Images [B, 1, 28, 28] from a local generator.
at::Tensor images(int64_t batch, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  return torch::empty({batch, 1, 28, 28}).uniform_(0, 1, generator);
}

/// One intra-op thread while a test compares bits: torch's CPU reductions
/// (batch norm's statistics) split over its thread pool, and the very first
/// call in a process may split them differently from the next (seen: two
/// calls of ist::forward itself differing in the last bit). One thread gives
/// every call the same sums.
class ist_mlp : public ::testing::TestWithParam<std::vector<int64_t>> {
protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::set_num_threads(1);
  }
  void TearDown() override { at::set_num_threads(threads_); }

private:
  int threads_ = 1;
};

} // namespace

TEST_P(ist_mlp, parameters_equal_make_ist_network_in_order_and_bits) {
  const auto spec = mlp_model_spec(GetParam(), 1234);
  const auto m = ist::make_mlp(spec);
  const auto net = ist::make_network(shape_of(spec), spec.seed);
  const auto named = m.named_parameters();
  const auto names = net.parameter_names();
  const auto values = net.parameters();
  ASSERT_EQ(named.size(), values.size());
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, names[i]);
    EXPECT_TRUE(same_bits(named[i].second, values[i])) << names[i];
  }
  EXPECT_EQ(weights_digest(m), ist::digest(net));
  EXPECT_TRUE(m.buffers().empty()); // batch statistics only: nothing but parameters
}

TEST_P(ist_mlp, logits_equal_ist_forward_bit_for_bit_in_training_and_evaluation) {
  const auto spec = mlp_model_spec(GetParam(), 99);
  auto m = ist::make_mlp(spec);
  const auto net = ist::make_network(shape_of(spec), spec.seed);
  const auto x = images(16, 7);
  torch::NoGradGuard no_grad;
  const auto expected = ist::forward(net, x);
  EXPECT_TRUE(same_bits(m.forward(x), expected));
  m.train(false); // batch statistics at evaluation too, as ist::evaluate
  EXPECT_TRUE(same_bits(m.forward(x), expected));
}

TEST_P(ist_mlp, gradients_equal_ist_forward_bit_for_bit) {
  const auto spec = mlp_model_spec(GetParam(), 5);
  auto m = ist::make_mlp(spec);
  auto net = ist::make_network(shape_of(spec), spec.seed);
  for (auto& p : net.parameters())
    p.requires_grad_(true);
  const auto x = images(8, 11);
  const auto labels = torch::arange(8, torch::kLong) % 10;
  ist::loss(m.forward(x), labels).backward();
  ist::loss(ist::forward(net, x), labels).backward();
  const auto params = m.parameters();
  const auto reference = net.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(same_bits(params[i].grad(), reference[i].grad())) << i;
}

INSTANTIATE_TEST_SUITE_P(widths, ist_mlp,
                         ::testing::Values(std::vector<int64_t>{32},
                                           std::vector<int64_t>{24, 40},
                                           std::vector<int64_t>{16, 8, 12}));

TEST(ist_mlp_spec, hidden_defaults_to_one_layer_of_4096) {
  EXPECT_EQ(model_spec{}.hidden, std::vector<int64_t>{4096});
}

TEST(ist_mlp_spec, layer_names_and_input_channels) {
  auto spec = mlp_model_spec({6, 4}, 3);
  spec.in_channels = 3;
  const auto m = ist::make_mlp(spec);
  EXPECT_EQ(m.layer_names(),
            (std::vector<std::string>{"flatten", "fc1", "bn1", "relu1", "fc2", "bn2", "relu2",
                                      "fc3", "norm"}));
  EXPECT_EQ(m.parameters().front().size(1), 3 * 28 * 28);
}

// What the data-parallel freeze section reads at parse time, without
// building the network: the built model's names and batch norms.
TEST(ist_mlp_spec, its_listing_is_the_built_model_s_layers) {
  for (const auto& hidden : {std::vector<int64_t>{6}, std::vector<int64_t>{6, 4, 5}}) {
    const auto spec = mlp_model_spec(hidden, 3);
    const auto m = ist::make_mlp(spec);
    const auto listed = ist::list_mlp_layers(spec);
    EXPECT_EQ(listed.names, m.layer_names());
    EXPECT_EQ(listed.batch_dependent, batch_dependent_layers(m));
    EXPECT_TRUE(listed.ties.empty());
  }
  EXPECT_THROW(ist::list_mlp_layers(mlp_model_spec({8, 0}, 1)), error);
}

TEST(ist_mlp_spec, refuses_an_empty_or_non_positive_width) {
  EXPECT_THROW(ist::make_mlp(mlp_model_spec({}, 1)), error);
  EXPECT_THROW(ist::make_mlp(mlp_model_spec({8, 0}, 1)), error);
  auto spec = mlp_model_spec({8}, 1);
  spec.classes = 0;
  EXPECT_THROW(ist::make_mlp(spec), error);
}
