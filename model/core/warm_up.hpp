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

/// A moment of a run's training: the clock and the samples trained by then.
struct training_mark {
  std::chrono::steady_clock::time_point at;
  int64_t samples = 0;
};

/// The steady training: the samples trained after the warm-up, every
/// epoch's, and their seconds (no evaluation inside).
struct steady_span {
  int64_t samples = 0;
  double seconds = 0;
};

/// The sum of spans of training, one an epoch: each from the mark it
/// started at to the last mark after it. The steady training of
/// warm_up_watch below and of the actors' progress reports
/// (actors/runtime/progress_line.hpp).
class epoch_spans {
public:
  /// A span starts at `mark`; the open one, if any, joins the sum.
  void start(const training_mark& mark) {
    close();
    from_ = mark;
  }
  /// A later mark of the open span (with none open, one starts there).
  void extend(const training_mark& mark) {
    if (from_)
      to_ = mark;
    else
      from_ = mark;
  }
  bool open() const { return from_.has_value(); }
  /// The open span joins the sum; none is open after it.
  void close() {
    closed_ = sum();
    from_.reset();
    to_.reset();
  }
  /// The spans so far (the open one included); unset while they hold no
  /// sample.
  std::optional<steady_span> total() const {
    steady_span s = sum();
    if (s.samples <= 0)
      return std::nullopt;
    return s;
  }

private:
  steady_span sum() const {
    steady_span s = closed_;
    if (from_ && to_ && to_->samples > from_->samples) {
      s.samples += to_->samples - from_->samples;
      s.seconds += std::chrono::duration<double>(to_->at - from_->at).count();
    }
    return s;
  }

  std::optional<training_mark> from_; ///< where the open span starts
  std::optional<training_mark> to_;   ///< its last mark so far
  steady_span closed_;                ///< the closed spans
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
      spans_.start(training_mark{std::chrono::steady_clock::now(), trained_});
  }

  /// `trained` samples are trained so far (a step just ended).
  void trained(int64_t trained) {
    const training_mark now{std::chrono::steady_clock::now(), trained};
    trained_ = trained;
    if (end_) {
      spans_.extend(now); // an epoch nobody said started: from its first step's end
    } else if (samples_ > 0 && trained >= samples_) {
      end_ = now;
      spans_.start(now);
    }
  }

  /// An epoch's last step ended: its span joins the sum.
  void epoch_ended() { spans_.close(); }

  const std::optional<training_mark>& end() const { return end_; }

  /// The steady span so far (the open epoch's steps included); unset while
  /// no step ended after the warm-up.
  std::optional<steady_span> steady() const { return spans_.total(); }

private:
  int64_t samples_ = 0;
  int64_t trained_ = 0;
  std::optional<training_mark> end_;
  epoch_spans spans_;
};

} // namespace baton::model
