#include "model/ist/ist.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "tests/support/synthetic_sets.hpp"

using namespace baton::model;
using baton::model::testing::kept_synthetic;
using namespace baton::model::ist;

namespace {

/// 6x6 synthetic images (36 inputs): every run takes milliseconds.
const dataset& ist_train_data() { return kept_synthetic(72, 1, 6, 3); }
const dataset& ist_test_data() { return kept_synthetic(40, 1, 6, 4); }

ist::shape small_shape(std::vector<int64_t> hidden) {
  ist::shape s;
  s.inputs = 36;
  s.hidden = std::move(hidden);
  s.classes = 10;
  return s;
}

/// The network as torch::nn modules (Linear without bias, BatchNorm1d
/// without running statistics, an affine-free BatchNorm1d on the logits)
/// holding copies of `net`'s tensors: the by-hand model the tests train
/// with torch::optim::SGD.
torch::nn::Sequential as_modules(const ist::network& net) {
  torch::NoGradGuard no_grad;
  torch::nn::Sequential seq;
  seq->push_back(torch::nn::Flatten());
  for (size_t k = 0; k <= net.hidden_layers(); ++k) {
    const auto& w = net.weights[k];
    torch::nn::Linear fc(torch::nn::LinearOptions(w.size(1), w.size(0)).bias(false));
    fc->weight.copy_(w);
    seq->push_back(fc);
    const bool hidden = k < net.hidden_layers();
    torch::nn::BatchNorm1d bn(
        torch::nn::BatchNorm1dOptions(w.size(0)).track_running_stats(false).affine(hidden));
    if (hidden) {
      bn->weight.copy_(net.bn_weight[k]);
      bn->bias.copy_(net.bn_bias[k]);
    }
    seq->push_back(bn);
    if (hidden)
      seq->push_back(torch::nn::ReLU());
  }
  return seq;
}

/// The modules' parameters back as an ist::network.
ist::network from_modules(const torch::nn::Sequential& seq, size_t hidden_layers) {
  ist::network net;
  auto params = seq->parameters(); // fc1, bn1.w, bn1.b, fc2, ..., fc_out
  for (size_t k = 0; k < hidden_layers; ++k) {
    net.weights.push_back(params[3 * k].detach().clone());
    net.bn_weight.push_back(params[3 * k + 1].detach().clone());
    net.bn_bias.push_back(params[3 * k + 2].detach().clone());
  }
  net.weights.push_back(params.back().detach().clone());
  return net;
}

/// Plain SGD on the module network, one step per minibatch.
void train_modules(torch::nn::Sequential& seq, torch::optim::SGD& sgd,
                   const std::vector<std::vector<int64_t>>& minibatches) {
  for (const auto& ids : minibatches) {
    auto [images, labels] = gather(ist_train_data(), ids);
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(seq->forward(images), labels).backward();
    sgd.step();
  }
}

void expect_equal_networks(const ist::network& a, const ist::network& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  const auto names = a.parameter_names();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << names[i];
}

/// Whether whole-network neuron pair (row i of layer k, column j of layer
/// k-1) lies in some worker's diagonal block.
bool in_some_block(const ist::partition& p, size_t k, int64_t i, int64_t j) {
  for (int32_t w = 0; w < p.workers; ++w) {
    const auto& rows = p.neurons(k, w);
    const auto& columns = p.neurons(k - 1, w);
    if (std::binary_search(rows.begin(), rows.end(), i) &&
        std::binary_search(columns.begin(), columns.end(), j))
      return true;
  }
  return false;
}

} // namespace

// -- partitions ------------------------------------------------------------------

TEST(ist, subnets_of_a_round_are_disjoint_and_cover_every_hidden_neuron) {
  const std::vector<int64_t> hidden{7, 13, 16, 5};
  for (int32_t workers = 1; workers <= 5; ++workers)
    for (int64_t round : {0, 1, 7}) {
      const auto p = ist::make_partition(hidden, workers, 42, round);
      ASSERT_EQ(p.parts.size(), hidden.size());
      for (size_t k = 0; k < hidden.size(); ++k) {
        std::set<int64_t> seen;
        for (int32_t w = 0; w < workers; ++w) {
          const auto& part = p.neurons(k, w);
          // the remainder: the first width % W parts have one neuron more
          const int64_t expected = hidden[k] / workers + (w < hidden[k] % workers ? 1 : 0);
          EXPECT_EQ(static_cast<int64_t>(part.size()), expected);
          EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
          for (int64_t n : part) {
            EXPECT_TRUE(n >= 0 && n < hidden[k]);
            EXPECT_TRUE(seen.insert(n).second) << "neuron " << n << " in two parts";
          }
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), hidden[k]) << "layer " << k;
      }
    }
}

TEST(ist, the_same_seed_gives_the_same_partition_in_two_independent_calls) {
  const std::vector<int64_t> hidden{16, 11};
  const auto a = ist::make_partition(hidden, 3, 9, 4);
  const auto b = ist::make_partition(hidden, 3, 9, 4);
  EXPECT_EQ(a.parts, b.parts);
  EXPECT_NE(a.parts, ist::make_partition(hidden, 3, 9, 5).parts) << "a new round reshuffles";
  EXPECT_NE(a.parts, ist::make_partition(hidden, 3, 10, 4).parts) << "another seed";
  EXPECT_NE(ist::permutation(16, 9, 4, 0), ist::permutation(16, 9, 4, 1)) << "layers differ";
}

TEST(ist, partitions_refuse_more_workers_than_neurons) {
  EXPECT_THROW(ist::make_partition({4, 2}, 3, 1, 0), error);
  EXPECT_THROW(ist::make_partition({4}, 0, 1, 0), error);
}

// -- subnets ---------------------------------------------------------------------

TEST(ist, write_back_changes_exactly_the_subnets_and_leaves_off_diagonal_blocks) {
  const auto shape = small_shape({8, 6, 5});
  const auto start = ist::make_network(shape, 3);
  const auto p = ist::make_partition(shape.hidden, 3, 3, 2);
  auto whole = start.clone();
  for (int32_t w = 0; w < 3; ++w) {
    auto sub = slice_subnet(whole, p, w);
    for (auto& t : sub.parameters())
      t.add_(100.0 * (w + 1));
    write_back_subnet(whole, sub, p, w);
  }
  // The first layer's rows, the output layer's columns and the batch norm
  // parameters are all some worker's: every one changed.
  for (size_t k : {size_t{0}, size_t{3}})
    EXPECT_TRUE(torch::all(whole.weights[k] != start.weights[k]).item<bool>());
  for (size_t k = 0; k < 3; ++k)
    EXPECT_TRUE(torch::all(whole.bn_weight[k] != start.bn_weight[k]).item<bool>());
  for (size_t k = 1; k < 3; ++k) {
    auto now = whole.weights[k].accessor<float, 2>();
    auto before = start.weights[k].accessor<float, 2>();
    for (int64_t i = 0; i < shape.hidden[k]; ++i)
      for (int64_t j = 0; j < shape.hidden[k - 1]; ++j)
        EXPECT_EQ(now[i][j] != before[i][j], in_some_block(p, k, i, j)) << k << ":" << i << "," << j;
  }
}

TEST(ist, a_round_leaves_weights_outside_every_diagonal_block_as_they_were) {
  ist::settings spec;
  spec.shape = small_shape({10, 9});
  spec.workers = 3;
  spec.batch_size = 8;
  spec.local_steps = 3; // 72 / 8 / 3 = 3 steps: one round
  spec.optimizer = {0.1, 0.9, 0};
  const auto result = ist::run_local(ist_train_data(), ist_test_data(), spec);
  ASSERT_EQ(result.rounds, 1);
  const auto start = ist::make_network(spec.shape, spec.seed);
  const auto p = ist::make_partition(spec.shape.hidden, 3, spec.seed, 0);
  auto now = result.network.weights[1].accessor<float, 2>();
  auto before = start.weights[1].accessor<float, 2>();
  int64_t changed = 0;
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 10; ++j) {
      if (!in_some_block(p, 1, i, j)) {
        EXPECT_EQ(now[i][j], before[i][j]) << i << "," << j;
      }
      changed += now[i][j] != before[i][j];
    }
  EXPECT_GT(changed, 0) << "the diagonal blocks trained";
}

TEST(ist, write_back_refuses_a_subnet_of_another_shape) {
  const auto shape = small_shape({8, 6});
  auto whole = ist::make_network(shape, 1);
  const auto p = ist::make_partition(shape.hidden, 2, 1, 0);
  const auto q = ist::make_partition(shape.hidden, 3, 1, 0);
  EXPECT_THROW(write_back_subnet(whole, slice_subnet(whole, q, 0), p, 0), error);
}

TEST(ist, a_subnet_evaluates_as_a_network) {
  const auto shape = small_shape({8, 6});
  const auto whole = ist::make_network(shape, 1);
  const auto sub = slice_subnet(whole, ist::make_partition(shape.hidden, 2, 1, 0), 1);
  EXPECT_EQ(sub.shape().hidden, (std::vector<int64_t>{4, 3}));
  auto [images, labels] = gather(ist_test_data(), {0, 1, 2, 3});
  EXPECT_EQ(ist::forward(sub, images).sizes(), (std::vector<int64_t>{4, 10}));
  const auto e = ist::evaluate(sub, ist_test_data(), 13); // 40 = 13 + 13 + 13 + 1: the 1 joins
  EXPECT_EQ(e.samples, 40);
  EXPECT_TRUE(e.accuracy >= 0 && e.accuracy <= 1);
  EXPECT_GT(e.loss, 0);
}

// -- training ---------------------------------------------------------------------

TEST(ist, one_worker_is_plain_sgd_on_the_whole_network_bit_for_bit) {
  ist::settings spec;
  spec.shape = small_shape({12, 10});
  spec.workers = 1;
  spec.batch_size = 8;
  spec.local_steps = 4; // 9 steps per epoch: rounds of 4, 4, 1
  spec.epochs = 2;
  spec.optimizer = {0.05, 0, 1e-3};
  const auto result = ist::run_local(ist_train_data(), ist_test_data(), spec);
  EXPECT_EQ(result.rounds, 6);
  auto seq = as_modules(ist::make_network(spec.shape, spec.seed));
  torch::optim::SGD sgd(seq->parameters(),
                        torch::optim::SGDOptions(0.05).momentum(0).weight_decay(1e-3));
  for (int32_t epoch = 0; epoch < 2; ++epoch)
    train_modules(seq, sgd, ist::worker_minibatches(72, spec.seed, epoch, 0, 1, 8));
  const auto reference = from_modules(seq, 2);
  expect_equal_networks(result.network, reference);
  EXPECT_EQ(result.weights_digest, ist::digest(reference));
}

TEST(ist, one_worker_with_momentum_resets_it_every_round) {
  ist::settings spec;
  spec.shape = small_shape({12});
  spec.workers = 1;
  spec.batch_size = 8;
  spec.local_steps = 9; // one round per epoch: a fresh optimizer per epoch
  spec.epochs = 2;
  spec.optimizer = {0.05, 0.9, 0};
  const auto result = ist::run_local(ist_train_data(), ist_test_data(), spec);
  auto seq = as_modules(ist::make_network(spec.shape, spec.seed));
  for (int32_t epoch = 0; epoch < 2; ++epoch) {
    torch::optim::SGD sgd(seq->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    train_modules(seq, sgd, ist::worker_minibatches(72, spec.seed, epoch, 0, 1, 8));
  }
  expect_equal_networks(result.network, from_modules(seq, 1));
}

namespace {

/// Worker `worker`'s subnet sliced element by element.
ist::network slice_by_hand(const ist::network& whole, const ist::partition& p, int32_t worker) {
  const size_t layers = whole.hidden_layers();
  ist::network sub;
  for (size_t k = 0; k <= layers; ++k) {
    const auto& w = whole.weights[k];
    std::vector<int64_t> rows(static_cast<size_t>(w.size(0))), columns(static_cast<size_t>(w.size(1)));
    std::iota(rows.begin(), rows.end(), 0);
    std::iota(columns.begin(), columns.end(), 0);
    if (k < layers)
      rows = p.neurons(k, worker);
    if (k > 0)
      columns = p.neurons(k - 1, worker);
    auto out = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(columns.size())});
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t j = 0; j < columns.size(); ++j)
        out[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = w[rows[i]][columns[j]];
    sub.weights.push_back(out);
    if (k < layers) {
      auto g = torch::empty({static_cast<int64_t>(rows.size())}), b = torch::empty_like(g);
      for (size_t i = 0; i < rows.size(); ++i) {
        g[static_cast<int64_t>(i)] = whole.bn_weight[k][rows[i]];
        b[static_cast<int64_t>(i)] = whole.bn_bias[k][rows[i]];
      }
      sub.bn_weight.push_back(g);
      sub.bn_bias.push_back(b);
    }
  }
  return sub;
}

/// Writes a subnet back element by element.
void write_back_by_hand(ist::network& whole, const ist::network& sub, const ist::partition& p,
                        int32_t worker) {
  torch::NoGradGuard no_grad;
  const size_t layers = whole.hidden_layers();
  for (size_t k = 0; k <= layers; ++k) {
    auto& w = whole.weights[k];
    for (int64_t i = 0; i < sub.weights[k].size(0); ++i)
      for (int64_t j = 0; j < sub.weights[k].size(1); ++j) {
        const int64_t row = k < layers ? p.neurons(k, worker)[static_cast<size_t>(i)] : i;
        const int64_t column = k > 0 ? p.neurons(k - 1, worker)[static_cast<size_t>(j)] : j;
        w[row][column] = sub.weights[k][i][j];
      }
    for (int64_t i = 0; k < layers && i < sub.bn_weight[k].size(0); ++i) {
      whole.bn_weight[k][p.neurons(k, worker)[static_cast<size_t>(i)]] = sub.bn_weight[k][i];
      whole.bn_bias[k][p.neurons(k, worker)[static_cast<size_t>(i)]] = sub.bn_bias[k][i];
    }
  }
}

} // namespace

TEST(ist, one_round_of_two_workers_is_slice_local_steps_and_write_back_by_hand) {
  ist::settings spec;
  spec.shape = small_shape({9, 7}); // widths W = 2 does not divide
  spec.workers = 2;
  spec.batch_size = 8;
  spec.local_steps = 4; // 72 / 8 / 2 = 4 steps: exactly one round
  spec.optimizer = {0.1, 0.9, 1e-3};
  const auto result = ist::run_local(ist_train_data(), ist_test_data(), spec);
  ASSERT_EQ(result.rounds, 1);

  const auto start = ist::make_network(spec.shape, spec.seed);
  const auto p = ist::make_partition(spec.shape.hidden, 2, spec.seed, 0);
  auto expected = start.clone();
  for (int32_t w = 0; w < 2; ++w) {
    auto seq = as_modules(slice_by_hand(start, p, w));
    torch::optim::SGD sgd(seq->parameters(),
                          torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
    train_modules(seq, sgd, ist::worker_minibatches(72, spec.seed, 0, w, 2, 8));
    const auto trained = from_modules(seq, 2);
    write_back_by_hand(expected, trained, p, w);
    EXPECT_EQ(result.exchanged_elements[static_cast<size_t>(w)], trained.numel());
  }
  expect_equal_networks(result.network, expected);
  EXPECT_FALSE(torch::equal(result.network.weights[0], start.weights[0])) << "it trained";
}

TEST(ist, workers_draw_different_orders_of_the_whole_set) {
  const auto a = ist::worker_minibatches(72, 5, 0, 0, 2, 8);
  const auto b = ist::worker_minibatches(72, 5, 0, 1, 2, 8);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, ist::worker_minibatches(72, 5, 0, 0, 2, 8));
  EXPECT_NE(a, ist::worker_minibatches(72, 5, 1, 0, 2, 8)) << "a new epoch reshuffles";
  EXPECT_EQ(ist::rounds_per_epoch(9, 4), 3);
  EXPECT_THROW(ist::steps_per_epoch(15, 8, 2), error);
}

// -- shards and bytes ---------------------------------------------------------------

TEST(ist, shard_pieces_tile_every_subnet_tensor_with_owned_neurons) {
  const auto shape = small_shape({7, 9, 5});
  for (int32_t workers = 1; workers <= 3; ++workers)
    for (int32_t shards = 1; shards <= 4; ++shards) {
      const auto p = ist::make_partition(shape.hidden, workers, 8, 1);
      for (int32_t w = 0; w < workers; ++w) {
        const auto sub = slice_subnet(ist::make_network(shape, 8), p, w).parameters();
        std::vector<int64_t> next(sub.size(), 0); // the next position each tensor expects
        int64_t elements = 0;
        for (int32_t s = 0; s < shards; ++s)
          for (const auto& piece : ist::shard_pieces(shape, p, w, s, shards)) {
            EXPECT_EQ(piece.positions.begin, next[piece.tensor]) << "shard order";
            next[piece.tensor] = piece.positions.end;
            const auto owned = ist::shard_neurons(shape.hidden[piece.layer], s, shards);
            for (int64_t i = piece.positions.begin; i < piece.positions.end; ++i) {
              const int64_t n = p.neurons(piece.layer, w)[static_cast<size_t>(i)];
              EXPECT_TRUE(n >= owned.begin && n < owned.end);
            }
            EXPECT_EQ(piece.elements, sub[piece.tensor]
                                          .narrow(piece.dim, piece.positions.begin,
                                                  piece.positions.size())
                                          .numel());
            elements += piece.elements;
          }
        for (size_t t = 0; t < sub.size(); ++t)
          EXPECT_EQ(next[t], sub[t].size(t % 3 == 0 && t > 0 ? 1 : 0)) << "tensor " << t;
        EXPECT_EQ(elements, ist::subnet_elements(shape, p, w));
      }
    }
}

TEST(ist, bytes_per_round_match_the_formula) {
  const auto shape = small_shape({8, 12});
  for (int32_t workers : {1, 2, 4}) {
    const auto p = ist::make_partition(shape.hidden, workers, 1, 0);
    for (int32_t w = 0; w < workers; ++w)
      EXPECT_DOUBLE_EQ(4.0 * static_cast<double>(ist::subnet_elements(shape, p, w)),
                       ist::bytes_formula(shape, workers));
  }
  // 1/W of the first and last layers, 1/W^2 of the hidden-to-hidden one
  EXPECT_DOUBLE_EQ(ist::bytes_formula(shape, 2),
                   4.0 * (36 * 8 / 2 + 8 * 12 / 4 + 12 * 10 / 2 + 2 * (8 + 12) / 2));
  const auto odd = small_shape({7, 9});
  const auto p = ist::make_partition(odd.hidden, 2, 1, 0);
  for (int32_t w = 0; w < 2; ++w)
    EXPECT_EQ(ist::subnet_elements(odd, p, w), slice_subnet(ist::make_network(odd, 1), p, w).numel());
}

TEST(ist, same_seed_same_initial_network_and_widths_as_asked) {
  const auto shape = small_shape({6, 5, 4});
  const auto a = ist::make_network(shape, 7);
  EXPECT_EQ(ist::digest(a), ist::digest(ist::make_network(shape, 7)));
  EXPECT_NE(ist::digest(a), ist::digest(ist::make_network(shape, 8)));
  EXPECT_EQ(a.shape().hidden, shape.hidden);
  EXPECT_EQ(a.weights.size(), 4u);
  EXPECT_EQ(a.numel(), 36 * 6 + 6 * 5 + 5 * 4 + 4 * 10 + 2 * (6 + 5 + 4));
  EXPECT_THROW(ist::make_network(small_shape({}), 1), error);
}

TEST(ist, learns_fashion_mnist_with_two_workers) {
  if (!std::filesystem::exists(std::string(default_fashion_mnist_dir) +
                               "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << default_fashion_mnist_dir;
  const auto train = load_fashion_mnist(default_fashion_mnist_dir, split::train, 640);
  const auto test = load_fashion_mnist(default_fashion_mnist_dir, split::test, 300);
  ist::settings spec;
  spec.shape.hidden = {64, 64};
  spec.workers = 2;
  spec.batch_size = 32;
  spec.local_steps = 5;
  spec.epochs = 4;
  spec.optimizer = {0.05, 0, 0};
  const auto result = ist::run_local(train, test, spec);
  ASSERT_EQ(result.test_accuracy.size(), 4u);
  EXPECT_LT(result.train_loss.back(), result.train_loss.front());
  EXPECT_GT(result.test_accuracy.back(), 0.5) << "chance is 0.1";
  EXPECT_EQ(result.steps, 4 * 10);
  EXPECT_EQ(result.samples, 2 * 4 * 10 * 32);
}

TEST(ist, shard_pieces_assemble_the_subnet_and_write_it_back) {
  const auto shape = small_shape({7, 9, 5});
  const auto start = ist::make_network(shape, 4);
  for (int32_t shards : {1, 2, 3}) {
    const auto p = ist::make_partition(shape.hidden, 2, 4, 3);
    auto by_pieces = start.clone(), by_subnet = start.clone();
    for (int32_t w = 0; w < 2; ++w) {
      const auto sub = slice_subnet(start, p, w).parameters();
      std::vector<std::vector<at::Tensor>> parts(sub.size());
      for (int32_t s = 0; s < shards; ++s)
        for (const auto& piece : ist::shard_pieces(shape, p, w, s, shards)) {
          auto values = take_piece(start, p, w, piece);
          parts[piece.tensor].push_back(values);
          put_piece(by_pieces, p, w, piece, values + 1000.0 * (s + 1)); // a shard's mark
        }
      auto trained = slice_subnet(start, p, w);
      for (size_t t = 0; t < sub.size(); ++t) {
        const int64_t dim = t % 3 == 0 && t > 0 ? 1 : 0;
        EXPECT_TRUE(torch::equal(torch::cat(parts[t], dim), sub[t])) << "tensor " << t;
      }
      // the same marks through the subnet: write_back_subnet == every put_piece
      auto marked = trained.parameters();
      for (int32_t s = 0; s < shards; ++s)
        for (const auto& piece : ist::shard_pieces(shape, p, w, s, shards))
          marked[piece.tensor]
              .narrow(piece.dim, piece.positions.begin, piece.positions.size())
              .add_(1000.0 * (s + 1));
      write_back_subnet(by_subnet, trained, p, w);
    }
    expect_equal_networks(by_pieces, by_subnet);
  }
}
