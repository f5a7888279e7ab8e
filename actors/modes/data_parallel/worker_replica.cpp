#include "actors/modes/data_parallel/worker_replica.hpp"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "messages/codec.hpp"
#include "model/core/augment.hpp"
#include "model/core/error.hpp"
#include "model/core/batches.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/stage_trainer.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

worker_replica::worker_replica(model::layered_model m, const worker_settings& spec)
    : model_(std::move(m)), optimizer_(spec.optimizer), bucket_mb_(spec.bucket_mb), use_cache_(spec.cache),
      feature_block_(spec.feature_block) {
  parameters_ = model_.parameters();
  model::check_optimizer(optimizer_);
  for (const auto& p : parameters_)
    state_.push_back(model::make_parameter_state(p, optimizer_));
  if (spec.cache)
    cache_ = std::make_unique<model::feature_cache>(spec.cache_mb);
  if (!spec.freeze_groups.empty()) {
    freezer_.emplace(spec.freeze_groups, spec.adaptive);
    interval_.emplace(model::parameter_groups(model_, spec.freeze_groups),
                      static_cast<int32_t>(spec.freeze_groups.size()));
  }
  set_point(model::freeze_point(model_, spec.freeze_up_to));
}

/// Moves the freeze point (never backwards): modes, cache, layout, buckets.
void worker_replica::set_point(size_t point) {
  block_rows_ = model::prefix_block_rows(model_.slice(0, point), use_cache_, feature_block_);
  point_ = point;
  model::apply_freeze_point(model_, point);
  if (cache_)
    cache_->set_freeze_point(point);
  layout_ = model::make_flat_layout(model_, point);
  buckets_ = model::make_buckets(layout_, bucket_mb_);
}

namespace {

/// Hands each bucket to `on_bucket` once the backward has produced its last
/// gradient: a hook on every parameter that takes one, removed when this
/// goes. flush() hands over, after the backward, the buckets no hook
/// completed.
///
/// A hook copies its gradient into the bucket's flat vector at once (where
/// bucket_flat would put it) and keeps no reference to it: autograd then
/// stores the gradient itself as the parameter's (a gradient someone else
/// still holds is cloned first, a pass over every gradient of the step).
class bucket_hooks {
public:
  bucket_hooks(std::vector<at::Tensor>& parameters, const model::flat_layout& layout,
               const std::vector<model::bucket>& buckets,
               const worker_replica::bucket_ready& on_bucket)
      : parameters_(parameters), layout_(layout), buckets_(buckets), on_bucket_(on_bucket),
        arrived_(parameters.size(), false), offset_(parameters.size(), 0),
        flats_(buckets.size()), pending_(buckets.size(), 0), sent_(buckets.size(), false),
        gaps_(buckets.size(), false), bucket_of_(parameters.size(), buckets.size()) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t at = 0;
      for (size_t i : buckets[b].keys) {
        offset_[i] = at;
        at += layout.keys[i].range.size();
        if (parameters[i].requires_grad()) {
          bucket_of_[i] = b;
          pending_[b] += 1;
        } else {
          gaps_[b] = true; // its values stay zeros, as bucket_flat's
        }
      }
    }
    for (size_t i = 0; i < parameters.size(); ++i)
      if (bucket_of_[i] < buckets.size())
        handles_.emplace_back(
          i, parameters[i].register_hook([this, i](const at::Tensor& g) { arrived(i, g); }));
  }
  ~bucket_hooks() {
    for (auto [i, handle] : handles_)
      parameters_[i].remove_hook(handle);
  }
  bucket_hooks(const bucket_hooks&) = delete;
  bucket_hooks& operator=(const bucket_hooks&) = delete;

  /// The buckets not handed over yet, cut from the gradients the backward stored.
  void flush(const std::vector<at::Tensor>& grads) {
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (!sent_[b]) {
        sent_[b] = true;
        on_bucket_(b, model::bucket_flat(buckets_[b], layout_, grads));
      }
  }

private:
  /// Parameter i's gradient (each parameter is used once in the forward of
  /// the models baton builds, so this is what the backward stores).
  void arrived(size_t i, const at::Tensor& g) {
    const size_t b = bucket_of_[i];
    const auto& key = layout_.keys[i];
    if (arrived_[i] || sent_[b])
      throw model::error("data-parallel overlap: parameter " + key.name +
                         " got two gradients in one backward (a parameter used twice)");
    if (g.numel() != key.range.size())
      throw model::error("data-parallel overlap: parameter " + key.name + " got a gradient of " +
                         std::to_string(g.numel()) + " values, expected " +
                         std::to_string(key.range.size()));
    arrived_[i] = true;
    torch::NoGradGuard no_grad;
    auto& flat = flats_[b];
    if (!flat.defined()) {
      // In shared memory between the node processes of one host: the ring
      // sends the bucket (its chunks) without copying it again.
      flat = messages::empty_for_sending(buckets_[b].numel);
      if (gaps_[b])
        flat.zero_(); // its keys without a gradient stay zeros, as bucket_flat's
    }
    flat.narrow(0, offset_[i], key.range.size()).view(g.sizes()).copy_(g);
    if (--pending_[b] > 0)
      return;
    sent_[b] = true;
    on_bucket_(b, std::move(flat));
  }

  std::vector<at::Tensor>& parameters_;
  const model::flat_layout& layout_;
  const std::vector<model::bucket>& buckets_;
  const worker_replica::bucket_ready& on_bucket_;
  std::vector<bool> arrived_;      ///< per key: its gradient is in its bucket
  std::vector<int64_t> offset_;   ///< per key: where it starts in its bucket
  std::vector<at::Tensor> flats_; ///< per bucket: its flat vector, once a gradient arrived
  std::vector<size_t> pending_;   ///< per bucket: gradients not arrived yet
  std::vector<bool> sent_;
  std::vector<bool> gaps_;        ///< per bucket: it has a key that takes no gradient
  std::vector<size_t> bucket_of_; ///< per key (buckets.size(): none)
  std::vector<std::pair<size_t, unsigned>> handles_;
};

} // namespace

std::vector<at::Tensor> worker_replica::gradients(const model::dataset& data,
                                                  const std::vector<int64_t>& ids,
                                                  int32_t epoch, double& loss) {
  return gradients(data, ids, epoch, loss, {});
}

std::vector<at::Tensor> worker_replica::gradients(const model::dataset& data,
                                                  const std::vector<int64_t>& ids,
                                                  int32_t epoch, double& loss,
                                                  const bucket_ready& on_bucket) {
  using clock = std::chrono::steady_clock;
  auto began = clock::now();
  auto [images, labels] = model::gather_training(data, ids, epoch);
  // The inputs at hand give the rows the dataset's would (frozen_features).
  const at::Tensor input =
    point_ > 0 ? model::frozen_features(model_.slice(0, point_), cache_.get(), images, ids,
                                        block_rows_)
               : images;
  const at::Tensor logits = model_.slice(point_, model_.size()).forward(input);
  const at::Tensor mean_loss = torch::nn::functional::cross_entropy(logits, labels);
  if (const double value = mean_loss.item<double>(); !std::isfinite(value))
    watch_.check(value, model_.slice(point_, model_.size()), input);
  auto forwarded = clock::now();
  std::optional<bucket_hooks> hooks;
  if (on_bucket)
    hooks.emplace(parameters_, layout_, buckets_, on_bucket);
  mean_loss.backward();
  loss = mean_loss.item<double>();
  // The gradient tensors themselves: the model lets go of them.
  std::vector<at::Tensor> grads;
  for (auto& p : parameters_) {
    grads.push_back(p.grad().defined() ? p.grad().detach() : at::Tensor());
    p.mutable_grad() = at::Tensor();
  }
  if (hooks)
    hooks->flush(grads);
  phases_.forward += std::chrono::duration<double>(forwarded - began).count();
  phases_.backward += std::chrono::duration<double>(clock::now() - forwarded).count();
  return grads;
}

void worker_replica::step(const std::vector<at::Tensor>& gradients, double lr) {
  auto began = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  // Over the keys this step covers (the trainable ones): the reduced
  // gradient in a synchronous step, the worker's own in local SGD.
  const auto clipped = model::clip_grad_norm(gradients, optimizer_.clip_grad_norm);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!clipped[i].defined() || layout_.keys[i].fixed)
      continue;
    auto parameter = parameters_[i].detach();
    model::optimizer_step_in_place(parameter, clipped[i], state_[i], optimizer_, lr);
  }
  phases_.step += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

bool worker_replica::steps_of_mean() const {
  return optimizer_.name == "sgd" && optimizer_.clip_grad_norm <= 0 && !freezer_;
}

void worker_replica::step_of_mean(const std::vector<at::Tensor>& own,
                                  const std::vector<std::vector<other_chunk>>& others,
                                  double lr) {
  auto began = std::chrono::steady_clock::now();
  TORCH_CHECK(own.size() == buckets_.size() && others.size() == buckets_.size(),
              "worker replica: ", own.size(), " and ", others.size(), " buckets for ",
              buckets_.size());
  torch::NoGradGuard no_grad;
  constexpr int32_t workers = 2;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t at = 0; // the key's first element in the bucket
    for (size_t i : buckets_[b].keys) {
      const auto& key = layout_.keys[i];
      const int64_t end = at + key.range.size();
      if (key.fixed) { // kept by its file: never stepped
        at = end;
        continue;
      }
      std::vector<model::mean_piece> pieces;
      for (const auto& other : others[b]) {
        const int64_t from = std::max(at, other.range.begin);
        const int64_t to = std::min(end, other.range.end);
        if (from < to)
          pieces.push_back({from - at, own[b].narrow(0, from, to - from),
                            other.values.narrow(0, from - other.range.begin, to - from)});
      }
      auto parameter = parameters_[i].detach();
      if (!model::sgd_step_of_mean_in_place(parameter, pieces, workers, state_[i], optimizer_,
                                            lr)) {
        auto mean = at::empty({key.range.size()});
        for (const auto& piece : pieces) {
          auto into = mean.narrow(0, piece.offset, piece.a.numel());
          model::mean_of_two(piece.a, piece.b, workers, into);
        }
        model::optimizer_step_in_place(parameter, mean.view(key.shape), state_[i], optimizer_, lr);
      }
      at = end;
    }
  }
  phases_.step += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

void worker_replica::step_of_two(const std::vector<at::Tensor>& own,
                                 const std::vector<at::Tensor>& other, double lr, int32_t part,
                                 int32_t parts) {
  auto began = std::chrono::steady_clock::now();
  if (own.size() != parameters_.size() || other.size() != parameters_.size() || parts < 1 ||
      part < 0 || part >= parts)
    throw model::error("worker replica: " + std::to_string(own.size()) + " and " +
                       std::to_string(other.size()) + " gradients for " +
                       std::to_string(parameters_.size()) + " parameters, part " +
                       std::to_string(part) + " of " + std::to_string(parts));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if ((!own[i].defined() && !other[i].defined()) || layout_.keys[i].fixed)
      continue; // frozen, or kept by its file
    const int64_t n = parameters_[i].numel();
    if (!own[i].defined() || !other[i].defined() || own[i].numel() != n ||
        other[i].numel() != n || !flat(i))
      throw model::error("worker replica: the gradients of parameter " + std::to_string(i) +
                         " do not fit it");
    const int64_t lo = n * part / parts;
    const int64_t hi = n * (part + 1) / parts;
    if (lo == hi) {
      state_[i].steps += 1; // stepped by another part: its count is every part's
      continue;
    }
    auto part_of = [lo, hi](const at::Tensor& t) {
      return t.contiguous().view({-1}).narrow(0, lo, hi - lo);
    };
    auto parameter = part_of(parameters_[i].detach());
    model::parameter_state state{part_of(state_[i].first), {}, state_[i].steps};
    if (!model::sgd_step_of_mean_in_place(parameter, {{0, part_of(own[i]), part_of(other[i])}},
                                          2, state, optimizer_, lr))
      throw model::error("worker replica: parameter " + std::to_string(i) +
                         ": the step does not fuse");
    state_[i].steps = state.steps;
  }
  phases_.step += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

bool worker_replica::flat(size_t key) const {
  return parameters_[key].is_contiguous() && state_[key].first.is_contiguous();
}

bool worker_replica::steps_in_parts() const {
  bool all_flat = true;
  for (size_t i = 0; all_flat && i < parameters_.size(); ++i)
    all_flat = flat(i);
  return steps_of_mean() && !optimizer_.nesterov && all_flat;
}

std::vector<at::Tensor> worker_replica::stepped_tensors() const {
  std::vector<at::Tensor> tensors;
  for (const auto& p : parameters_)
    tensors.push_back(p.detach());
  for (const auto& s : state_)
    tensors.push_back(s.first);
  return tensors;
}

void worker_replica::share(const std::vector<at::Tensor>& tensors) {
  const size_t n = parameters_.size();
  bool fits = tensors.size() == 2 * n;
  for (size_t i = 0; fits && i < n; ++i)
    fits = tensors[i].sizes().equals(parameters_[i].sizes()) &&
           tensors[n + i].sizes().equals(state_[i].first.sizes());
  if (!fits)
    throw model::error("worker replica: the weights to share are not of this model");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < n; ++i) {
    parameters_[i].set_data(tensors[i]);
    state_[i].first = tensors[n + i];
  }
}

std::vector<at::Tensor> worker_replica::bucket_vectors(
  const std::vector<at::Tensor>& per_key) const {
  std::vector<at::Tensor> flats;
  for (const auto& b : buckets_)
    flats.push_back(model::bucket_flat(b, layout_, per_key));
  return flats;
}

std::vector<int64_t> worker_replica::bucket_sizes() const {
  std::vector<int64_t> sizes;
  for (const auto& b : buckets_)
    sizes.push_back(b.numel);
  return sizes;
}

std::vector<at::Tensor> worker_replica::per_key(const std::vector<at::Tensor>& means) const {
  TORCH_CHECK(means.size() == buckets_.size(), "worker replica: ", means.size(),
              " means for ", buckets_.size(), " buckets");
  std::vector<at::Tensor> out(layout_.keys.size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    model::scatter_bucket(buckets_[b], layout_, means[b], out);
  return out;
}

void worker_replica::set_parameters(const std::vector<at::Tensor>& mean) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < mean.size(); ++i)
    if (mean[i].defined())
      parameters_[i].copy_(mean[i]);
}

std::optional<model::freeze_decision> worker_replica::adapt(
  int64_t step, const std::vector<at::Tensor>& reduced) {
  if (!freezer_)
    return std::nullopt;
  interval_->add(reduced);
  if (!freezer_->due(step))
    return std::nullopt;
  const int32_t before = freezer_->frozen();
  auto decision = freezer_->decide(step, interval_->l1_norms());
  interval_->reset();
  if (!decision)
    return std::nullopt;
  decisions_.push_back(*decision);
  if (freezer_->frozen() > before)
    set_point(model::freeze_point(model_, decision->layer));
  return decision;
}

worker_replica::score worker_replica::share_correct(const model::dataset& test,
                                                    int64_t eval_batch, int32_t part,
                                                    int32_t parts) {
  torch::NoGradGuard no_grad;
  model_.slice(0, model_.size()).train(false);
  score s;
  const auto batches = model::plan_eval(test.size(), eval_batch);
  for (size_t k = static_cast<size_t>(part); k < batches.size(); k += static_cast<size_t>(parts)) {
    auto [images, labels] = model::gather(test, batches[k]);
    s.correct += model_.forward(images).argmax(1).eq(labels).sum().item<int64_t>();
    s.evaluated += static_cast<int64_t>(batches[k].size());
  }
  model::apply_freeze_point(model_, point_);
  return s;
}

model::training_state worker_replica::save_state(int64_t steps) const {
  model::training_state s;
  s.version = steps;
  s.tensors = model_.named_state();
  auto names = model_.named_parameters();
  for (size_t i = 0; i < names.size(); ++i) {
    s.tensors.emplace_back("momentum." + names[i].first, state_[i].first);
    s.tensors.emplace_back("stepped." + names[i].first,
                           torch::tensor(static_cast<int64_t>(state_[i].steps > 0)));
    if (state_[i].second.defined()) { // adam, adamw: the second moment and the count
      s.tensors.emplace_back("second." + names[i].first, state_[i].second);
      s.tensors.emplace_back("steps." + names[i].first, torch::tensor(state_[i].steps));
    }
  }
  for (auto& t : s.tensors)
    t.second = t.second.detach().clone();
  return s;
}

void worker_replica::restore(const model::training_state& s) {
  const auto names = model_.named_parameters();
  const auto buffers = model_.named_buffers();
  // Check everything first: a checkpoint that does not fit changes nothing.
  std::vector<at::Tensor> weights, buffer_values;
  std::vector<model::parameter_state> states;
  const at::Tensor count = torch::tensor(int64_t{0});
  for (const auto& [name, p] : names) {
    weights.push_back(s.matching(name, p));
    model::parameter_state state;
    state.first = s.matching("momentum." + name, p).clone();
    state.steps = s.matching("stepped." + name, count).item<int64_t>();
    if (model::has_second_moment(optimizer_)) {
      state.second = s.matching("second." + name, p).clone();
      state.steps = s.matching("steps." + name, count).item<int64_t>();
    }
    states.push_back(std::move(state));
  }
  for (const auto& [name, b] : buffers)
    buffer_values.push_back(s.matching(name, b));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < names.size(); ++i)
    parameters_[i].copy_(weights[i]);
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].second.copy_(buffer_values[i]);
  state_ = std::move(states);
}

model::cache_stats worker_replica::cache_stats() const {
  return cache_ ? cache_->stats() : model::cache_stats{};
}

std::string freeze_decision_json(const model::freeze_decision& d) {
  nlohmann::json j;
  j["event"] = "freeze";
  j["step"] = d.step;
  j["frozen_before"] = d.frozen_before;
  j["frozen_after"] = d.frozen_after;
  j["layer"] = d.layer;
  j["rates"] = d.rates;
  j["threshold"] = d.threshold;
  return j.dump();
}

void report_freezing(const worker_replica& replica, messages::actor_report& r) {
  r.figures.push_back({"frozen_layers", static_cast<double>(replica.point())});
  if (replica.caches()) {
    const auto c = replica.cache_stats();
    r.figures.insert(r.figures.end(),
                     {{"cache_hits", static_cast<double>(c.hits)},
                      {"cache_misses", static_cast<double>(c.misses)},
                      {"cache_rejected", static_cast<double>(c.rejected)},
                      {"cache_entries", static_cast<double>(c.entries)},
                      {"cache_bytes", static_cast<double>(c.bytes)},
                      {"cache_invalidations", static_cast<double>(c.invalidations)}});
  }
  for (const auto& d : replica.decisions())
    r.events.push_back(freeze_decision_json(d));
}

void log_decision(const std::string& name, const model::freeze_decision& d) {
  std::string rates;
  for (double rate : d.rates)
    rates += (rates.empty() ? "" : ", ") + fmt::format("{:.4g}", rate);
  spdlog::info("{}: adaptive freezing after step {}: {} -> {} group(s) frozen{}, change rates "
               "[{}], threshold {:.4g}",
               name, d.step, d.frozen_before, d.frozen_after,
               d.layer.empty() ? std::string{} : " (up to " + d.layer + ")", rates, d.threshold);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
