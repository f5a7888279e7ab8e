#include "actors/modes/transfer/merged_input.hpp"

#include <algorithm>

#include "actors/flow/turns.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

merged_input::merged_input(int32_t replicas)
    : by_replica_(static_cast<size_t>(std::max(1, replicas))) {}

void merged_input::add(messages::microbatch m) {
  by_replica_[turn_of(m.id, by_replica_.size())].push_back(std::move(m));
}

void merged_input::add(messages::control c) {
  // Replica k's n-th control is every replica's n-th: the first entry of
  // its kind and epoch still missing copies.
  const auto replicas = static_cast<int32_t>(by_replica_.size());
  for (auto& [held, copies] : controls_)
    if (copies < replicas && held.kind == c.kind && held.epoch == c.epoch) {
      ++copies;
      return;
    }
  controls_.emplace_back(std::move(c), 1);
}

std::deque<messages::microbatch>* merged_input::lowest(std::optional<int32_t> only_epoch_to) {
  std::deque<messages::microbatch>* best = nullptr;
  for (auto& q : by_replica_) {
    if (q.empty() || (only_epoch_to && q.front().epoch > *only_epoch_to))
      continue;
    if (best == nullptr || q.front().id < best->front().id)
      best = &q;
  }
  return best;
}

namespace {

/// The front of `q`, taken out.
head_input take_front(std::deque<messages::microbatch>& q) {
  head_input out{std::move(q.front())};
  q.pop_front();
  return out;
}

} // namespace

std::optional<head_input> merged_input::next() {
  const auto replicas = static_cast<int32_t>(by_replica_.size());
  if (!controls_.empty() && controls_.front().second == replicas) {
    // Complete: what came before it, then the control itself.
    if (auto* q = lowest(controls_.front().first.epoch))
      return take_front(*q);
    head_input out{std::move(controls_.front().first)};
    controls_.pop_front();
    return out;
  }
  if (std::any_of(by_replica_.begin(), by_replica_.end(),
                  [](const auto& q) { return q.empty(); }))
    return std::nullopt;
  return take_front(*lowest(std::nullopt));
}

size_t merged_input::held() const {
  size_t n = 0;
  for (const auto& q : by_replica_)
    n += q.size();
  return n;
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
