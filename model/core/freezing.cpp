#include "model/core/freezing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <torch/torch.h>

#include "model/core/error.hpp"

namespace baton::model {

// -- adaptive_freezer ------------------------------------------------------------

adaptive_freezer::adaptive_freezer(std::vector<std::string> groups,
                                   adaptive_freeze_options options)
    : groups_(std::move(groups)), options_(options) {
  if (groups_.empty())
    throw error("adaptive freezing: expected at least one freezable layer group");
  if (options_.interval < 1)
    throw error("adaptive freezing: expected interval >= 1, got " +
                std::to_string(options_.interval));
  if (!(options_.percentile >= 0 && options_.percentile <= 100))
    throw error("adaptive freezing: expected a percentile in [0, 100], got " +
                std::to_string(options_.percentile));
  if (options_.max_frozen > static_cast<int32_t>(groups_.size()))
    throw error("adaptive freezing: max_frozen " + std::to_string(options_.max_frozen) +
                " is more than the " + std::to_string(groups_.size()) + " freezable groups");
}

bool adaptive_freezer::due(int64_t step) const { return (step + 1) % options_.interval == 0; }

int32_t adaptive_freezer::limit() const {
  return options_.max_frozen < 0 ? static_cast<int32_t>(groups_.size()) : options_.max_frozen;
}

namespace {

double change_rate(double previous, double current) {
  if (previous == 0)
    return current == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::abs(previous - current) / previous;
}

} // namespace

std::optional<freeze_decision> adaptive_freezer::decide(int64_t step,
                                                        const std::vector<double>& norms) {
  if (norms.size() != groups_.size())
    throw error("adaptive freezing: " + std::to_string(norms.size()) + " gradient norms for " +
                std::to_string(groups_.size()) + " groups");
  const std::vector<double> previous = std::exchange(previous_, norms);
  if (previous.empty())
    return std::nullopt;
  freeze_decision d;
  d.step = step;
  d.frozen_before = frozen_;
  for (size_t g = static_cast<size_t>(frozen_); g < groups_.size(); ++g)
    d.rates.push_back(change_rate(previous[g], norms[g]));
  if (!d.rates.empty()) {
    d.threshold = percentile(d.rates, options_.percentile);
    for (double rate : d.rates) {
      if (frozen_ >= limit() || rate >= d.threshold)
        break;
      ++frozen_;
    }
  }
  d.frozen_after = frozen_;
  d.layer = frozen_ > 0 ? groups_[static_cast<size_t>(frozen_ - 1)] : std::string();
  return d;
}

void adaptive_freezer::restore(const state& s) {
  if (s.frozen < 0 || s.frozen > limit() ||
      (!s.previous.empty() && s.previous.size() != groups_.size()))
    throw error("adaptive freezing: a checkpoint with " + std::to_string(s.frozen) +
                " frozen groups and " + std::to_string(s.previous.size()) +
                " norms does not fit " + std::to_string(groups_.size()) + " groups");
  frozen_ = s.frozen;
  previous_ = s.previous;
}

double percentile(std::vector<double> values, double p) {
  TORCH_CHECK(!values.empty(), "percentile of no values");
  std::sort(values.begin(), values.end());
  const double position = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto low = static_cast<size_t>(std::floor(position));
  const size_t high = std::min(low + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(low);
  if (fraction == 0 || values[low] == values[high])
    return values[low]; // also keeps infinite rates out of inf - inf
  return values[low] + (values[high] - values[low]) * fraction;
}

// -- interval_gradients ----------------------------------------------------------

interval_gradients::interval_gradients(std::vector<int32_t> group_of, int32_t groups)
    : group_of_(std::move(group_of)), groups_(groups), sums_(group_of_.size()) {}

void interval_gradients::add(const std::vector<at::Tensor>& gradients) {
  TORCH_CHECK(gradients.size() == sums_.size(), "interval_gradients: ", gradients.size(),
              " gradients for ", sums_.size(), " parameters");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (group_of_[i] < 0 || !gradients[i].defined())
      continue;
    sums_[i] = sums_[i].defined() ? sums_[i] + gradients[i] : gradients[i].clone();
  }
}

std::vector<double> interval_gradients::l1_norms() const {
  std::vector<double> norms(static_cast<size_t>(groups_), 0.0);
  for (size_t i = 0; i < sums_.size(); ++i)
    if (sums_[i].defined())
      norms[static_cast<size_t>(group_of_[i])] +=
          sums_[i].abs().sum(at::kDouble).item<double>();
  return norms;
}

void interval_gradients::reset() {
  for (auto& s : sums_)
    s = at::Tensor();
}

// -- freeze points -----------------------------------------------------------------

std::vector<int32_t> parameter_groups(const layered_model& m,
                                      const std::vector<std::string>& group_last_layers) {
  std::vector<int32_t> group_of_layer(m.size(), -1);
  size_t begin = 0;
  for (size_t g = 0; g < group_last_layers.size(); ++g) {
    const int64_t last = m.index_of(group_last_layers[g]);
    if (last < 0 || static_cast<size_t>(last) < begin)
      throw error("freeze group '" + group_last_layers[g] +
                  "': expected a layer of the model after the previous group's last layer");
    for (size_t l = begin; l <= static_cast<size_t>(last); ++l)
      group_of_layer[l] = static_cast<int32_t>(g);
    begin = static_cast<size_t>(last) + 1;
  }
  std::vector<int32_t> out;
  for (const auto& p : m.parameter_table()) // a tied parameter in its first layer's group
    out.push_back(group_of_layer[p.layer]);
  return out;
}

size_t freeze_point(const layered_model& m, const std::string& up_to) {
  if (up_to.empty())
    return 0;
  const int64_t index = m.index_of(up_to);
  if (index < 0)
    throw error("freeze up_to '" + up_to + "': the model has no such layer");
  return static_cast<size_t>(index) + 1;
}

void apply_freeze_point(const layered_model& m, size_t point) {
  TORCH_CHECK(point <= m.size(), "apply_freeze_point: ", point, " of ", m.size(), " layers");
  layered_model frozen = m.slice(0, point);
  layered_model trainable = m.slice(point, m.size());
  // The trainable part first: a parameter tied between a frozen layer and a
  // trainable one is frozen (it belongs to its first layer, which is frozen).
  trainable.set_trainable(true);
  trainable.train(true);
  frozen.set_trainable(false);
  frozen.train(false);
}

std::vector<std::string> batch_dependent_layers(const layered_model& prefix) {
  std::vector<std::string> out;
  for (const auto& layer : prefix.layers())
    for (const auto& module : layer.module.ptr()->modules(/*include_self=*/true)) {
      const auto* bn1 = dynamic_cast<const torch::nn::BatchNorm1dImpl*>(module.get());
      const auto* bn2 = dynamic_cast<const torch::nn::BatchNorm2dImpl*>(module.get());
      const auto* bn3 = dynamic_cast<const torch::nn::BatchNorm3dImpl*>(module.get());
      if ((bn1 && !bn1->options.track_running_stats()) ||
          (bn2 && !bn2->options.track_running_stats()) ||
          (bn3 && !bn3->options.track_running_stats())) {
        out.push_back(layer.name);
        break;
      }
    }
  return out;
}

} // namespace baton::model
