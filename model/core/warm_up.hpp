#pragma once

// Where a run's warm-up ends. A run's first steps allocate and first touch
// their memory (the gradients, the optimizer's state, the allocator's
// arenas): `baton bench` rates the training after them, as the PyTorch peers
// time theirs after their warm-up steps, and `baton compare` checks its
// predictions against it. The steady training is every epoch's training
// after the warm-up, the evaluations between epochs left out. The actors'
// runs mark it with their progress reports (runtime.progress_every steps
// apart); the one-process runs mark every step with this watch.

#include <chrono>
#include <cstdint>
#include <optional>

namespace baton::model {

/// The clock and the samples trained when the warm-up ended.
struct warm_up_end {
  std::chrono::steady_clock::time_point at;
  int64_t samples = 0;
};

/// The steady training: the samples trained after the warm-up, every
/// epoch's, and their seconds (no evaluation inside).
struct steady_span {
  int64_t samples = 0;
  double seconds = 0;
};

/// Marks the end of the warm-up and sums the steps after it, epoch by epoch:
/// an epoch's span runs from its start (or the warm-up's end) to its last
/// step, so the evaluation after an epoch is never inside.
class warm_up_watch {
public:
  explicit warm_up_watch(int64_t samples = 0) : samples_(samples) {}

  /// An epoch starts (its evaluation, if any, is behind it).
  void epoch_started() {
    if (end_)
      from_ = warm_up_end{std::chrono::steady_clock::now(), trained_};
  }

  /// `trained` samples are trained so far (a step just ended).
  void trained(int64_t trained) {
    const auto now = std::chrono::steady_clock::now();
    trained_ = trained;
    if (!end_) {
      if (samples_ > 0 && trained >= samples_)
        from_ = end_ = warm_up_end{now, trained};
    } else if (from_) {
      to_ = warm_up_end{now, trained};
    } else { // an epoch nobody said started: from its first step's end
      from_ = warm_up_end{now, trained};
    }
  }

  /// An epoch's last step ended: its span joins the sum.
  void epoch_ended() {
    if (from_ && to_ && to_->samples > from_->samples) {
      closed_.samples += to_->samples - from_->samples;
      closed_.seconds += std::chrono::duration<double>(to_->at - from_->at).count();
    }
    from_.reset();
    to_.reset();
  }

  const std::optional<warm_up_end>& end() const { return end_; }

  /// The steady span so far (the open epoch's steps included); unset while
  /// no step ended after the warm-up.
  std::optional<steady_span> steady() const {
    steady_span sum = closed_;
    if (from_ && to_ && to_->samples > from_->samples) {
      sum.samples += to_->samples - from_->samples;
      sum.seconds += std::chrono::duration<double>(to_->at - from_->at).count();
    }
    if (sum.samples <= 0)
      return std::nullopt;
    return sum;
  }

private:
  int64_t samples_ = 0;
  int64_t trained_ = 0;
  std::optional<warm_up_end> end_;
  std::optional<warm_up_end> from_; ///< where the open epoch's span starts
  std::optional<warm_up_end> to_;   ///< its last step so far
  steady_span closed_;              ///< the ended epochs' spans
};

} // namespace baton::model
