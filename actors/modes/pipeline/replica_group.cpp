#include "actors/modes/pipeline/replica_group.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>

namespace baton::actors {
inline namespace modes {
namespace pipeline {

replica_group::replica_group(int32_t replica, int32_t replicas, int64_t applied)
  : replica_(replica), replicas_(replicas), contributed_(applied), applied_(applied) {}

void replica_group::add_backward(int64_t step, int32_t step_size,
                                 std::vector<at::Tensor> gradients) {
  size_of_step_[step] = step_size;
  auto& sum = mine_[step];
  if (sum.empty())
    sum = std::move(gradients);
  else
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] = sum[i] + gradients[i];
  backwards_of_step_[step] += 1;
}

void replica_group::add_peer(int32_t replica, int64_t step, int32_t step_size,
                             std::vector<at::Tensor> sum) {
  if (step < applied_ || contributions_[step].count(replica))
    throw std::runtime_error("replica " + std::to_string(replica) + " sent step " +
                             std::to_string(step) + " twice");
  size_of_step_[step] = step_size;
  contributions_[step][replica] = std::move(sum);
}

std::optional<contribution> replica_group::next_contribution(
  const std::function<std::vector<at::Tensor>()>& zeros) {
  auto size = size_of_step_.find(contributed_);
  if (size == size_of_step_.end())
    return std::nullopt;
  contribution c{contributed_, size->second, {}};
  const auto share = share_of(c.step_size, replica_, replicas_);
  if (share == 0) {
    c.sum = zeros();
  } else {
    auto done = backwards_of_step_.find(c.step);
    if (done == backwards_of_step_.end() || done->second < share)
      return std::nullopt;
    backwards_of_step_.erase(done);
    c.sum = std::move(mine_.at(c.step));
    mine_.erase(c.step);
  }
  contributions_[c.step][replica_] = c.sum; // the same tensors as sent
  contributed_ = c.step + 1;
  return c;
}

std::optional<std::vector<at::Tensor>> replica_group::next_step(bool mean) {
  auto it = contributions_.find(applied_);
  if (it == contributions_.end() || it->second.size() < static_cast<size_t>(replicas_))
    return std::nullopt;
  auto sum = it->second.at(0);
  for (int32_t r = 1; r < replicas_; ++r)
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] = sum[i] + it->second.at(r)[i];
  if (mean)
    for (auto& t : sum)
      t = t / size_of_step_.at(applied_);
  contributions_.erase(it);
  size_of_step_.erase(applied_);
  applied_ += 1;
  return sum;
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
