#pragma once

// When a reporting actor sends its progress to the coordinator: every
// runtime.progress_every steps, after the first step of every epoch but the
// first, and where an epoch's training ends (before its evaluation). The
// coordinator times the steady training from these reports
// (progress_line::steady): an epoch's span runs from its first report to its
// last, so with a report right after the evaluation and one right before
// the next, every step of an epoch but its first is inside, however short
// the epoch (its last steps hold a pipeline's drain and local SGD's last
// average).

#include <cstdint>

namespace baton::actors {
inline namespace flow {

class progress_pace {
public:
  /// `steps` steps of `epoch` ended; whether a report is due (every
  /// `every` steps, or the first step of a new epoch after the first).
  bool due(int32_t epoch, int64_t steps, int32_t every) {
    since_ += steps;
    const bool epoch_began = epoch != epoch_;
    epoch_ = epoch;
    if (since_ < every && !(epoch_began && epoch > 0))
      return false;
    since_ = 0;
    return true;
  }

  /// The training of `epoch` ended: true the first time for each epoch.
  bool ended(int32_t epoch) {
    if (epoch <= ended_)
      return false;
    ended_ = epoch;
    return true;
  }

private:
  int64_t since_ = 0;
  int32_t epoch_ = 0;
  int32_t ended_ = -1;
};

} // namespace flow
} // namespace baton::actors
