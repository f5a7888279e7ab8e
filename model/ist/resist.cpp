#include "model/ist/resist.hpp"

#include <algorithm>

#include <torch/torch.h>

#include "model/core/epoch_selection.hpp"
#include "model/core/error.hpp"
#include "model/core/batches.hpp"
#include "model/core/pretrain.hpp"

namespace baton::model::ist {

// -- the network and its blocks -------------------------------------------------

layered_model make_resist_network(int64_t in_channels, int64_t classes, uint64_t seed) {
  if (in_channels < 1 || classes < 1)
    throw error("resist: expected in_channels >= 1 and classes >= 1");
  model_spec backbone;
  backbone.name = "resnet18";
  backbone.in_channels = in_channels;
  backbone.seed = seed;
  return make_pretrain_model(backbone, classes);
}

std::vector<size_t> resist_partitioned_layers(const layered_model& m) {
  std::vector<size_t> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& name = m.layers()[i].name;
    const bool middle = name.rfind("layer2_", 0) == 0 || name.rfind("layer3_", 0) == 0;
    if (middle && name.substr(7) != "0")
      out.push_back(i);
  }
  if (out.empty())
    throw error("resist: the model has no layer2_<k> or layer3_<k> block with k >= 1 "
                "(expected resnet18)");
  return out;
}

// -- the deal of a round --------------------------------------------------------

std::vector<int32_t> resist_deal::holders(size_t block) const {
  std::vector<int32_t> out;
  for (int32_t w = 0; w < workers; ++w)
    if (holds(w, block))
      out.push_back(w);
  return out;
}

bool resist_deal::holds(int32_t worker, size_t block) const {
  const auto& mine = held.at(static_cast<size_t>(worker));
  return std::binary_search(mine.begin(), mine.end(), block);
}

resist_deal make_resist_deal(size_t blocks, int32_t workers, uint64_t seed, int64_t round) {
  if (blocks < 1 || workers < 1)
    throw error("resist: a deal needs at least one block and one worker");
  const size_t slots = std::max(blocks, static_cast<size_t>(workers));
  const uint64_t deal_seed = derive_seed(seed, "resist-deal");
  std::vector<int64_t> sequence;
  for (size_t k = 0; sequence.size() < slots; ++k) {
    auto order = permutation(static_cast<int64_t>(blocks), deal_seed, round, k);
    sequence.insert(sequence.end(), order.begin(), order.end());
  }
  resist_deal deal;
  deal.round = round;
  deal.workers = workers;
  deal.blocks = blocks;
  deal.held.resize(static_cast<size_t>(workers));
  for (size_t i = 0; i < slots; ++i)
    deal.held[i % static_cast<size_t>(workers)].push_back(static_cast<size_t>(sequence[i]));
  for (auto& mine : deal.held)
    std::sort(mine.begin(), mine.end());
  return deal;
}

double resist_eval_scale(size_t blocks, int32_t workers) {
  return 1.0 / static_cast<double>(std::min(blocks, static_cast<size_t>(std::max(workers, 1))));
}

std::vector<bool> resist_active_layers(size_t layers, const std::vector<size_t>& partitioned,
                                       const resist_deal& deal, int32_t worker) {
  std::vector<bool> active(layers, true);
  for (size_t b = 0; b < partitioned.size(); ++b)
    active.at(partitioned[b]) = deal.holds(worker, b);
  return active;
}

std::vector<size_t> resist_state_layers(const layered_model& m) {
  std::vector<size_t> out;
  for (size_t i = 0; i < m.size(); ++i)
    out.insert(out.end(), m.layers()[i].module.ptr()->parameters(true).size(), i);
  for (size_t i = 0; i < m.size(); ++i)
    out.insert(out.end(), m.layers()[i].module.ptr()->buffers(true).size(), i);
  return out;
}

// -- local steps and the merge -----------------------------------------------------

at::Tensor resist_forward(const layered_model& m, const std::vector<bool>& active,
                          const at::Tensor& x) {
  at::Tensor y = x;
  for (size_t i = 0; i < m.size(); ++i)
    if (active.at(i)) // shallow constness, as layered_model::forward
      y = const_cast<torch::nn::AnyModule&>(m.layers()[i].module).forward(std::move(y));
  return y;
}

local_result resist_local_steps(layered_model& m, const std::vector<bool>& active,
                                const dataset& train,
                                const std::vector<std::vector<int64_t>>& minibatches,
                                int32_t epoch, const optimizer_spec& optimizer,
                                const round_steps& at) {
  std::vector<at::Tensor> parameters;
  for (size_t i = 0; i < m.size(); ++i)
    if (active.at(i))
      for (auto& p : m.layers()[i].module.ptr()->parameters(true))
        parameters.push_back(p.requires_grad_(true));
  m.train(true);
  return sgd_steps(parameters, train, minibatches, epoch, optimizer,
                   [&](const at::Tensor& images, const at::Tensor& labels) {
                     return torch::nn::functional::cross_entropy(
                         resist_forward(m, active, images), labels);
                   },
                   at);
}

at::Tensor resist_average(const std::vector<at::Tensor>& values) {
  if (values.empty())
    throw error("resist: an average of no values (a block nobody held)");
  torch::NoGradGuard no_grad;
  at::Tensor sum = values.front().detach().clone();
  for (size_t i = 1; i < values.size(); ++i)
    sum.add_(values[i]);
  const auto count = static_cast<int64_t>(values.size());
  if (count == 1)
    return sum;
  if (at::isIntegralType(sum.scalar_type(), /*includeBool=*/false))
    return sum.div(count, "floor");
  return sum.div_(static_cast<double>(count));
}

void resist_merge(layered_model& merged, const std::vector<layered_model>& replicas,
                  const std::vector<size_t>& partitioned, const resist_deal& deal) {
  const auto layers = resist_state_layers(merged);
  std::vector<std::vector<bool>> active;
  for (int32_t w = 0; w < deal.workers; ++w)
    active.push_back(resist_active_layers(merged.size(), partitioned, deal, w));
  std::vector<std::vector<at::Tensor>> states;
  for (const auto& r : replicas)
    states.push_back(r.state());
  auto target = merged.state();
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < target.size(); ++k) {
    std::vector<at::Tensor> values;
    for (size_t w = 0; w < replicas.size(); ++w)
      if (active.at(w)[layers[k]])
        values.push_back(states[w][k]);
    target[k].copy_(resist_average(values));
  }
}

void copy_state(layered_model& to, const layered_model& from) {
  auto target = to.state();
  const auto source = from.state();
  if (target.size() != source.size())
    throw error("resist: copy_state between models of " + std::to_string(source.size()) +
                " and " + std::to_string(target.size()) + " state tensors");
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < target.size(); ++k)
    target[k].copy_(source[k]);
}

// -- evaluation ------------------------------------------------------------------

namespace {

void scale_blocks(const layered_model& m, const std::vector<size_t>& partitioned,
                  double scale) {
  for (size_t i : partitioned)
    if (!set_residual_scale(m.layers().at(i), scale))
      throw error("resist: layer '" + m.layers()[i].name + "' is not a residual block");
}

} // namespace

resist_evaluation resist_evaluate(const layered_model& m, const std::vector<size_t>& partitioned,
                                  double scale, const dataset& data, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  layered_model view = m.slice(0, m.size()); // shares the layers: train() is shallow-const
  view.train(false);
  scale_blocks(m, partitioned, scale);
  double loss_sum = 0;
  int64_t correct = 0;
  for (const auto& ids : plan_eval(data.size(), batch_size)) {
    auto [images, labels] = gather(data, ids);
    const auto logits = m.forward(images);
    loss_sum += torch::nn::functional::cross_entropy(logits, labels).item<double>() *
                static_cast<double>(ids.size());
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
  }
  scale_blocks(m, partitioned, 1.0);
  view.train(true);
  resist_evaluation out;
  if (data.size() > 0) {
    out.loss = loss_sum / static_cast<double>(data.size());
    out.accuracy = static_cast<double>(correct) / static_cast<double>(data.size());
  }
  return out;
}

// -- the local reference -------------------------------------------------------

void check_resist_settings(const dataset& train, const resist_settings& spec) {
  if (spec.workers < 1 || spec.epochs < 0 || spec.local_steps < 1 || spec.eval_batch < 1)
    throw error("resist: expected workers >= 1, epochs >= 0, local_steps >= 1 and "
                "eval_batch >= 1");
  if (train.size() > 0 && train.images.size(1) != spec.in_channels)
    throw error("resist: samples of " + std::to_string(train.images.size(1)) +
                " channels, expected in_channels = " + std::to_string(spec.in_channels));
  steps_per_epoch(train.size(), spec.batch_size, spec.workers);
}

namespace {

struct run_state {
  const resist_settings& spec;
  layered_model merged;
  std::vector<layered_model> replicas;
  std::vector<size_t> partitioned;
  resist_result result;
};

/// One round: every replica from the merged network, its minibatches on
/// its sub-ResNet, then the merge.
local_result run_round(run_state& s, const dataset& train, int64_t round, int32_t epoch,
                       const round_minibatches& minibatches) {
  const auto deal = make_resist_deal(s.partitioned.size(), s.spec.workers, s.spec.seed, round);
  local_result sum;
  for (int32_t w = 0; w < s.spec.workers; ++w) {
    auto& replica = s.replicas[static_cast<size_t>(w)];
    copy_state(replica, s.merged);
    const auto active = resist_active_layers(replica.size(), s.partitioned, deal, w);
    const auto r = resist_local_steps(replica, active, train, minibatches[static_cast<size_t>(w)],
                                      epoch, s.spec.optimizer,
                                      schedule_of(s.spec.optimizer, round, train.size(),
                                                  s.spec.batch_size, s.spec.workers,
                                                  s.spec.local_steps, s.spec.epochs));
    sum.loss_sum += r.loss_sum;
    sum.samples += r.samples;
  }
  resist_merge(s.merged, s.replicas, s.partitioned, deal);
  return sum;
}

void run_epoch(run_state& s, const dataset& train, int32_t epoch) {
  run_reference_epoch(train, s.spec, epoch, s.result,
                      [&](int64_t round, const round_minibatches& minibatches) {
                        return run_round(s, train, round, epoch, minibatches);
                      });
}

} // namespace

resist_result run_resist_local(const dataset& train, const dataset& test,
                               const resist_settings& spec) {
  return run_resist_local(data_splits{train, {}, test}, spec);
}

resist_result run_resist_local(const data_splits& data, const resist_settings& spec) {
  const dataset& train = data.train;
  check_resist_settings(train, spec);
  run_state s{spec, make_resist_network(spec.in_channels, spec.classes, spec.seed), {}, {}, {}};
  s.partitioned = resist_partitioned_layers(s.merged);
  for (int32_t w = 0; w < spec.workers; ++w)
    s.replicas.push_back(make_resist_network(spec.in_channels, spec.classes, spec.seed));
  const double scale = resist_eval_scale(s.partitioned.size(), spec.workers);
  epoch_selection selection(spec.selection.patience);
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    run_epoch(s, train, epoch);
    const auto evaluation = resist_evaluate(s.merged, s.partitioned, scale, data.test,
                                            spec.eval_batch);
    s.result.test_loss.push_back(evaluation.loss);
    s.result.test_accuracy.push_back(evaluation.accuracy);
    if (data.validation.size() == 0)
      continue;
    s.result.validation_accuracy.push_back(
      resist_evaluate(s.merged, s.partitioned, scale, data.validation, spec.eval_batch).accuracy);
    if (selection.add(epoch, s.result.validation_accuracy.back()) && spec.selection.keep_best) {
      if (s.result.best_network.size() == 0)
        s.result.best_network = make_resist_network(spec.in_channels, spec.classes, spec.seed);
      copy_state(s.result.best_network, s.merged);
    }
    s.result.best_epoch = selection.best_epoch();
    if (selection.exhausted())
      break;
  }
  s.result.weights_digest = weights_digest(s.merged);
  s.result.network = s.merged;
  return std::move(s.result);
}

} // namespace baton::model::ist
