#include "actors/modes/data_parallel/ps_exchange.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "messages/codec.hpp"
#include "model/core/error.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/stage_trainer.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

/// A slice that arrived: `what` names it in the error.
void check_slice(const at::Tensor& t, int64_t expected, const std::string& what) {
  if (!t.defined() || t.scalar_type() != at::kFloat || t.dim() != 1 || t.numel() != expected)
    throw model::error(what + ": expected " + std::to_string(expected) +
                       " float32 elements in one dimension");
}

} // namespace

bool may_compute(int64_t step, int64_t applied, int32_t max_staleness) {
  return applied >= step - max_staleness;
}

std::vector<model::key_range> shard_parts(const model::flat_layout& layout, int32_t shards) {
  std::vector<model::key_range> parts;
  for (const auto& range : model::shard_ranges(layout, shards))
    parts.push_back(model::trainable_part(range, layout));
  return parts;
}

void write_range(std::vector<at::Tensor>& parameters, const model::flat_layout& layout,
                 const model::key_range& range, const at::Tensor& values) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model::key_pieces(range, layout))
    // view(): a parameter is contiguous, and a copy would be written in vain.
    parameters[p.key].detach().view({-1}).narrow(0, p.in_key, p.size)
      .copy_(values.narrow(0, p.in_range, p.size));
}

// -- the worker's side ---------------------------------------------------------------

ps_exchange::ps_exchange(model::flat_layout layout, int32_t shards)
  : layout_(std::move(layout)) {
  parts_ = shard_parts(layout_, shards);
  for (const auto& p : parts_)
    busy_ += p.empty() ? 0 : 1;
}

const model::key_range& ps_exchange::part(int32_t shard) const {
  if (shard < 0 || shard >= shards())
    throw model::error("parameter server: no shard " + std::to_string(shard));
  return parts_[static_cast<size_t>(shard)];
}

std::vector<at::Tensor> ps_exchange::split(const std::vector<at::Tensor>& gradients) const {
  std::vector<at::Tensor> out;
  for (const auto& p : parts_)
    out.push_back(p.empty() ? at::Tensor()
                            : model::flatten_range(gradients, layout_, p,
                                                   messages::empty_for_sending(p.size())));
  return out;
}

void ps_exchange::receive(int32_t shard, int64_t step, at::Tensor slice) {
  const auto what = "parameter server: shard " + std::to_string(shard) + "'s slice of step " +
                    std::to_string(step);
  if (idle(shard))
    throw model::error(what + ": the shard is idle (its keys are frozen)");
  if (step < applied_)
    throw model::error(what + ": step " + std::to_string(step) + " is applied already");
  check_slice(slice, part(shard).size(), what);
  auto& slices = arrived_[step];
  if (!slices.emplace(shard, std::move(slice)).second)
    throw model::error(what + ": arrived twice");
}

void ps_exchange::restart_at(int64_t step) {
  if (!arrived_.empty() || applied_ > 0 || step < 0)
    throw model::error("parameter server: restarted after a slice arrived (or at a negative "
                       "step)");
  applied_ = step;
}

bool ps_exchange::complete() const {
  auto it = arrived_.find(applied_);
  return busy_ == 0 || (it != arrived_.end() && it->second.size() == busy_);
}

void ps_exchange::apply(std::vector<at::Tensor>& parameters) {
  if (!complete())
    throw model::error("parameter server: the slices of step " + std::to_string(applied_) +
                       " have not all arrived");
  auto it = arrived_.find(applied_);
  if (it != arrived_.end()) {
    for (const auto& [shard, slice] : it->second)
      write_range(parameters, layout_, parts_[static_cast<size_t>(shard)], slice);
    arrived_.erase(it);
  }
  applied_ += 1;
}

// -- the shard's side ----------------------------------------------------------------

shard_optimizer::shard_optimizer(model::key_range part, const at::Tensor& initial,
                                 int32_t workers, model::optimizer_spec optimizer,
                                 model::lr_schedule schedule, int64_t steps_per_epoch)
  : part_(part), workers_(workers), optimizer_(optimizer), schedule_(schedule),
    steps_per_epoch_(steps_per_epoch) {
  if (workers < 1)
    throw model::error("parameter shard: expected workers >= 1");
  check_slice(initial.reshape({-1}), part.size(), "parameter shard: its initial weights");
  weights_ = initial.detach().reshape({-1}).clone();
  model::check_optimizer(optimizer_);
  state_ = model::make_parameter_state(weights_, optimizer_);
}

void shard_optimizer::push(int32_t worker, int64_t step, at::Tensor gradient) {
  const auto what = "parameter shard: worker " + std::to_string(worker) +
                    "'s gradient of step " + std::to_string(step);
  if (worker < 0 || worker >= workers_)
    throw model::error(what + ": no such worker (" + std::to_string(workers_) + " workers)");
  if (step < steps_)
    throw model::error(what + ": step " + std::to_string(step) + " is taken already");
  check_slice(gradient, part_.size(), what);
  auto& pushes = pushed_[step];
  pushes.resize(static_cast<size_t>(workers_));
  auto& slot = pushes[static_cast<size_t>(worker)];
  if (slot.defined())
    throw model::error(what + ": pushed twice");
  slot = std::move(gradient);
}

void shard_optimizer::restore(int64_t steps, const at::Tensor& weights,
                              const at::Tensor& momentum, const at::Tensor& second) {
  if (!pushed_.empty() || steps < 0)
    throw model::error("parameter shard: restored after a push (or to a negative step)");
  check_slice(weights.reshape({-1}), part_.size(), "parameter shard: its restored weights");
  check_slice(momentum.reshape({-1}), part_.size(), "parameter shard: its restored momentum");
  if (model::has_second_moment(optimizer_)) {
    if (!second.defined())
      throw model::error("parameter shard: its checkpoint has no second moment (written by an "
                         "sgd run?), which " + optimizer_.name + " needs");
    check_slice(second.reshape({-1}), part_.size(), "parameter shard: its restored second moment");
    state_.second = second.detach().reshape({-1}).clone();
  }
  weights_ = weights.detach().reshape({-1}).clone();
  state_.first = momentum.detach().reshape({-1}).clone();
  state_.steps = steps;
  steps_ = steps;
}

bool shard_optimizer::ready() const {
  auto it = pushed_.find(steps_);
  if (it == pushed_.end())
    return false;
  return std::all_of(it->second.begin(), it->second.end(),
                     [](const at::Tensor& g) { return g.defined(); });
}

at::Tensor shard_optimizer::step() {
  if (!ready())
    throw model::error("parameter shard: the pushes of step " + std::to_string(steps_) +
                       " have not all arrived");
  auto it = pushed_.find(steps_);
  const double lr = model::scheduled_lr(schedule_, steps_, steps_per_epoch_);
  // The reference's arithmetic per element (model/data_parallel/data_parallel.hpp): the
  // sum in worker order, then / W, then the step; optimizer_step_out_of_place is
  // per element, so stepping the slice at once gives the bits of stepping
  // each parameter whole. Two workers' mean is taken in SGD's own pass
  // (g0 + g1 then / 2: the same bits), where SGD allows.
  const auto& pushes = it->second;
  std::vector<at::Tensor> kept;
  for (const auto& r : fixed_)
    kept.push_back(weights_.narrow(0, r.begin, r.size()).clone());
  // The new weights go to every worker: made for sending (no copy to another
  // node process of this host).
  at::Tensor next = workers_ == 2 ? messages::empty_for_sending(weights_.numel()) : at::Tensor{};
  if (!next.defined() ||
      !model::sgd_step_of_mean_in_place(weights_, {{0, pushes[0], pushes[1]}}, workers_, state_,
                                        optimizer_, lr, &next)) {
    const at::Tensor mean = at::div(model::worker_order_sum(pushes),
                                    static_cast<double>(workers_));
    next = model::optimizer_step_out_of_place(weights_, mean, state_, optimizer_, lr);
  }
  for (size_t k = 0; k < fixed_.size(); ++k) {
    const auto& r = fixed_[k];
    next.narrow(0, r.begin, r.size()).copy_(kept[k]);
    for (auto* t : {&state_.first, &state_.second})
      if (t->defined())
        t->narrow(0, r.begin, r.size()).zero_();
  }
  pushed_.erase(it);
  weights_ = std::move(next);
  steps_ += 1;
  return weights_;
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
