#pragma once

// Where a run's warm-up ends. A run's first steps allocate and first touch
// their memory (the gradients, the optimizer's state, the allocator's
// arenas): `baton bench` rates the training after them, as the PyTorch peers
// time theirs after their warm-up steps. The actors' runs mark the first
// progress report (runtime.progress_every steps in); the one-process runs
// mark as many samples with this watch.

#include <chrono>
#include <cstdint>
#include <optional>

namespace baton::model {

/// The clock and the samples trained when the warm-up ended.
struct warm_up_end {
  std::chrono::steady_clock::time_point at;
  int64_t samples = 0;
};

/// Marks the end of the warm-up: the first time the samples trained so far
/// reach `samples` (0: never marked).
class warm_up_watch {
public:
  explicit warm_up_watch(int64_t samples = 0) : samples_(samples) {}

  /// `trained` samples are trained so far (a step just ended).
  void trained(int64_t trained) {
    if (!end_ && samples_ > 0 && trained >= samples_)
      end_ = warm_up_end{std::chrono::steady_clock::now(), trained};
  }

  const std::optional<warm_up_end>& end() const { return end_; }

private:
  int64_t samples_ = 0;
  std::optional<warm_up_end> end_;
};

} // namespace baton::model
