#include "actors/runtime/run_stop.hpp"

#include <utility>

#include <spdlog/fmt/fmt.h>

namespace baton::actors {
inline namespace runtime {

run_stop::run_stop(double target_accuracy, double budget_seconds, size_t result_groups,
                   int32_t patience)
  : target_(target_accuracy), budget_(budget_seconds), groups_(result_groups),
    patience_(patience) {}

std::optional<early_stop> run_stop::epoch(const std::string& head, int32_t epoch,
                                          double test_accuracy, double seconds,
                                          double validation_accuracy) {
  last_epoch_ = early_stop{head, epoch, test_accuracy, seconds, "stop_after_seconds"};
  if (stopping())
    return std::nullopt;
  if (patience_ > 0 && validation_accuracy >= 0) {
    auto& judged = judged_.try_emplace(head, patience_).first->second;
    // An epoch reported again (a restart replayed its end) was judged: added
    // twice, it counted as an epoch without a higher accuracy, and a run
    // restarted after its first epoch stopped there with "0 epochs without".
    if (auto last = last_judged_.find(head); last == last_judged_.end() || epoch > last->second) {
      last_judged_[head] = epoch;
      judged.add(epoch, validation_accuracy);
    }
    size_t exhausted = 0;
    for (const auto& [group, selection] : judged_)
      exhausted += selection.exhausted() ? 1 : 0;
    if (exhausted == groups_) {
      early_stop at{head, epoch, test_accuracy, seconds, "early_stopping"};
      at.best_epoch = judged.best_epoch();
      at.best_validation_accuracy = judged.best_accuracy();
      at.patience = patience_;
      return at;
    }
  }
  if (target_ <= 0 || test_accuracy < target_)
    return std::nullopt;
  reached_.insert(head);
  if (reached_.size() < groups_)
    return std::nullopt;
  return early_stop{head, epoch, test_accuracy, seconds};
}

std::optional<early_stop> run_stop::time(double trained) const {
  if (budget_ <= 0 || stopping() || trained < budget_)
    return std::nullopt;
  auto at = last_epoch_;
  at.seconds = trained;
  return at;
}

void run_stop::begin(early_stop at, clock_type::time_point now) {
  stopped_ = std::move(at);
  began_ = now;
}

void run_stop::salvage(clock_type::time_point now) {
  salvaging_ = true;
  began_ = now;
}

bool run_stop::past(clock_type::duration limit, clock_type::time_point now) const {
  return stopping() && now - began_ >= limit;
}

std::string stop_reason(const early_stop& at, double target_accuracy) {
  if (at.reason == "stop_at_accuracy")
    return fmt::format("epoch {} of {} reached {:.2f}% (target_accuracy {:.2f}%)", at.epoch + 1,
                       at.actor, 100 * at.test_accuracy, 100 * target_accuracy);
  if (at.reason == "early_stopping")
    return fmt::format("epoch {} of {}: {} epoch{} without a higher validation accuracy than "
                       "epoch {}'s {:.2f}% (early_stopping.patience {})",
                       at.epoch + 1, at.actor, at.epoch - at.best_epoch,
                       at.epoch - at.best_epoch == 1 ? "" : "s", at.best_epoch + 1,
                       100 * at.best_validation_accuracy, at.patience);
  return fmt::format("trained {:.1f} s (runtime.stop_after_seconds)", at.seconds);
}

} // namespace runtime
} // namespace baton::actors
