#include "model/ist_mlp/network.hpp"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "model/core/digest.hpp"
#include "model/core/error.hpp"
#include "model/core/batches.hpp"

namespace baton::model::ist {

namespace {

constexpr double batch_norm_eps = 1e-5; // torch::nn::BatchNorm1d's default

/// Batch norm with the batch's statistics, as BatchNorm1d with
/// track_running_stats(false) calls it (so that a module-built network gives
/// the same bits).
at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return torch::batch_norm(x, weight, bias, /*running_mean=*/{}, /*running_var=*/{},
                           /*training=*/true, /*momentum=*/0.1, batch_norm_eps,
                           at::globalContext().userEnabledCuDNN());
}

} // namespace

void check_shape(const shape& shape) {
  bool ok = shape.inputs > 0 && shape.classes > 0 && !shape.hidden.empty();
  for (int64_t h : shape.hidden)
    ok = ok && h > 0;
  if (!ok)
    throw error("ist network: expected inputs, classes and every hidden width > 0 and at least "
                "one hidden layer");
}

shape network::shape() const {
  ist::shape s;
  s.inputs = weights.front().size(1);
  s.classes = weights.back().size(0);
  s.hidden.clear();
  for (const auto& g : bn_weight)
    s.hidden.push_back(g.size(0));
  return s;
}

std::vector<at::Tensor> network::parameters() const {
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < hidden_layers(); ++k) {
    out.push_back(weights[k]);
    out.push_back(bn_weight[k]);
    out.push_back(bn_bias[k]);
  }
  out.push_back(weights.back());
  return out;
}

std::vector<std::string> network::parameter_names() const {
  std::vector<std::string> out;
  for (size_t k = 0; k < hidden_layers(); ++k) {
    const std::string n = std::to_string(k + 1);
    out.insert(out.end(), {"fc" + n + ".weight", "bn" + n + ".weight", "bn" + n + ".bias"});
  }
  out.push_back("fc" + std::to_string(hidden_layers() + 1) + ".weight");
  return out;
}

int64_t network::numel() const {
  int64_t n = 0;
  for (const auto& p : parameters())
    n += p.numel();
  return n;
}

network network::clone() const {
  network out;
  for (const auto& w : weights)
    out.weights.push_back(w.detach().clone());
  for (size_t k = 0; k < hidden_layers(); ++k) {
    out.bn_weight.push_back(bn_weight[k].detach().clone());
    out.bn_bias.push_back(bn_bias[k].detach().clone());
  }
  return out;
}

network make_network(const shape& shape, uint64_t seed) {
  check_shape(shape);
  torch::NoGradGuard no_grad;
  network net;
  int64_t fan_in = shape.inputs;
  std::vector<int64_t> outs = shape.hidden;
  outs.push_back(shape.classes);
  for (size_t i = 0; i < outs.size(); ++i) {
    auto generator = at::detail::createCPUGenerator(
        derive_seed(seed, "fc" + std::to_string(i + 1)));
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    net.weights.push_back(torch::empty({outs[i], fan_in}).uniform_(-bound, bound, generator));
    fan_in = outs[i];
  }
  for (int64_t h : shape.hidden) {
    net.bn_weight.push_back(torch::ones({h}));
    net.bn_bias.push_back(torch::zeros({h}));
  }
  return net;
}

at::Tensor forward(const network& net, const at::Tensor& images) {
  at::Tensor x = images.reshape({images.size(0), -1});
  for (size_t k = 0; k < net.hidden_layers(); ++k)
    x = torch::relu(batch_norm(torch::linear(x, net.weights[k]), net.bn_weight[k],
                               net.bn_bias[k]));
  return batch_norm(torch::linear(x, net.weights.back()), {}, {});
}

at::Tensor loss(const at::Tensor& logits, const at::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

evaluation evaluate(const network& net, const dataset& data, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  auto batches = plan_eval(data.size(), batch_size);
  if (batches.size() > 1 && batches.back().size() == 1) {
    batches[batches.size() - 2].push_back(batches.back().front());
    batches.pop_back();
  }
  evaluation out;
  double loss_sum = 0;
  int64_t correct = 0;
  for (const auto& ids : batches) {
    auto [images, labels] = gather(data, ids);
    const auto logits = forward(net, images);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    out.samples += static_cast<int64_t>(ids.size());
  }
  if (out.samples > 0) {
    out.loss = loss_sum / static_cast<double>(out.samples);
    out.accuracy = static_cast<double>(correct) / static_cast<double>(out.samples);
  }
  return out;
}

std::string digest(const network& net) {
  sha256 h;
  for (const auto& p : net.parameters()) {
    const auto c = p.detach().contiguous();
    h.update(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return h.hex();
}

} // namespace baton::model::ist
