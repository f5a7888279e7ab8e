#pragma once

// Where a run's warm-up ends. A run's first steps allocate and first touch
// their memory (the gradients, the optimizer's state, the allocator's
// arenas): `baton bench` rates the training after them, as the PyTorch peers
// time theirs after their warm-up steps, up to the end of that epoch (the
// evaluation after it is not training). The actors' runs mark the first
// progress report (runtime.progress_every steps in) and the last of its
// epoch; the one-process runs mark as many samples with this watch.

#include <chrono>
#include <cstdint>
#include <optional>

namespace baton::model {

/// The clock and the samples trained when the warm-up ended.
struct warm_up_end {
  std::chrono::steady_clock::time_point at;
  int64_t samples = 0;
};

/// The steady training: the samples trained from the end of the warm-up to
/// the last step of that epoch, and their seconds (no evaluation inside).
struct steady_span {
  int64_t samples = 0;
  double seconds = 0;
};

/// Marks the end of the warm-up, and the steps after it up to the end of its
/// epoch (or, where it ended with the epoch's last step, of the next one).
class warm_up_watch {
public:
  explicit warm_up_watch(int64_t samples = 0) : samples_(samples) {}

  /// `trained` samples are trained so far (a step just ended).
  void trained(int64_t trained) {
    const auto now = std::chrono::steady_clock::now();
    if (!end_) {
      if (samples_ > 0 && trained >= samples_)
        end_ = warm_up_end{now, trained};
    } else if (!closed_) {
      last_ = warm_up_end{now, trained};
    }
  }

  /// An epoch's last step ended: its evaluation is not steady training.
  void epoch_ended() { closed_ = last_.has_value(); }

  const std::optional<warm_up_end>& end() const { return end_; }

  /// The steady span; unset while no step ended after the warm-up.
  std::optional<steady_span> steady() const {
    if (!end_ || !last_)
      return std::nullopt;
    return steady_span{last_->samples - end_->samples,
                       std::chrono::duration<double>(last_->at - end_->at).count()};
  }

private:
  int64_t samples_ = 0;
  std::optional<warm_up_end> end_;
  std::optional<warm_up_end> last_; ///< the last step of the steady span so far
  bool closed_ = false;
};

} // namespace baton::model
