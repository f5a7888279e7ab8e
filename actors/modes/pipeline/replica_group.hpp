#pragma once

// The bookkeeping of a replicated stage's group: each replica sums the
// gradients of its share of a step (the source's minibatch), sends that sum
// to its peers, and every replica steps with the sum of all of them, in
// step order. Plain data, no CAF: the stage sends what next_contribution()
// gives to its peers and steps with what next_step() gives.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "actors/modes/pipeline/input_order.hpp" // share_of

namespace baton::actors {
inline namespace modes {
namespace pipeline {

/// A replica's sum of one step, to send to its peers.
struct contribution {
  int64_t step = 0;
  int32_t step_size = 0; ///< microbatches in the step
  std::vector<at::Tensor> sum;
};

class replica_group {
public:
  replica_group() = default;
  /// Replica `replica` of `replicas`, whose steps before `applied` are
  /// made (a restored stage continues after its checkpoint's step).
  replica_group(int32_t replica, int32_t replicas, int64_t applied);

  /// This replica's backward of a microbatch of `step` (of `step_size`
  /// microbatches): its gradients are added to its sum of the step, in the
  /// order of its backwards.
  void add_backward(int64_t step, int32_t step_size, std::vector<at::Tensor> gradients);

  /// Peer `replica`'s sum of `step`. Throws std::runtime_error when the
  /// peer sent that step already or the step was made.
  void add_peer(int32_t replica, int64_t step, int32_t step_size, std::vector<at::Tensor> sum);

  /// The next step in step order whose share this replica has done, its
  /// sum kept for the group step (a step it has no share of contributes
  /// `zeros()`); nullopt while the next one is not done.
  std::optional<contribution>
  next_contribution(const std::function<std::vector<at::Tensor>()>& zeros);

  /// The next group step in step order whose contributions are all in:
  /// their sum in replica order (the same bits on every replica), divided
  /// by the step's microbatches when `mean` (1f1b: each loss was its
  /// microbatch's mean); nullopt while one is missing.
  std::optional<std::vector<at::Tensor>> next_step(bool mean);

  /// Group steps made.
  int64_t applied() const { return applied_; }
  /// Steps this replica contributed to.
  int64_t contributed() const { return contributed_; }
  /// Every step this replica contributed to is made: the next forward may go.
  bool settled() const { return applied_ == contributed_; }

private:
  int32_t replica_ = 0;
  int32_t replicas_ = 1;
  std::map<int64_t, int32_t> backwards_of_step_;    ///< this replica's backwards per step
  std::map<int64_t, std::vector<at::Tensor>> mine_; ///< this replica's sums, until contributed
  std::map<int64_t, std::map<int32_t, std::vector<at::Tensor>>> contributions_;
  std::map<int64_t, int32_t> size_of_step_; ///< microbatches per step
  int64_t contributed_ = 0;
  int64_t applied_ = 0;
};

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
