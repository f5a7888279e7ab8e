#include "actors/runtime/best_epochs.hpp"

#include <utility>

namespace baton::actors {
inline namespace runtime {

best_epochs::best_epochs(const job_plan& plan) {
  const auto groups = plan.result_groups();
  for (const auto& a : plan.actors)
    if (a.sends_weights)
      group_[a.name] = !a.result.empty()  ? a.result
                       : groups.size() == 1 ? *groups.begin()
                                            : std::string{};
}

std::string best_epochs::group_of(const std::string& sender) const {
  auto it = group_.find(sender);
  return it == group_.end() ? std::string{} : it->second;
}

void best_epochs::epoch(const std::string& group, int32_t epoch, double validation_accuracy) {
  if (validation_accuracy < 0)
    return;
  auto last = last_judged_.find(group);
  if (last != last_judged_.end() && epoch <= last->second)
    return; // a replay after a restart: judged already
  last_judged_[group] = epoch;
  const bool best = judged_[group].add(epoch, validation_accuracy);
  for (auto& [sender, epochs] : pending_) {
    if (group_of(sender) != group)
      continue;
    auto it = epochs.find(epoch);
    if (best && it != epochs.end())
      best_[sender] = {epoch, std::move(it->second)};
    // This epoch and any before it are judged: nothing more to wait for.
    epochs.erase(epochs.begin(), epochs.upper_bound(epoch));
  }
}

void best_epochs::weights(messages::tensor_set w) {
  const std::string group = group_of(w.from);
  if (group.empty() || w.kind != "epoch_weights")
    return;
  const auto epoch = static_cast<int32_t>(w.step);
  auto last = last_judged_.find(group);
  if (last == last_judged_.end() || epoch > last->second) {
    pending_[w.from][epoch] = std::move(w.tensors);
    return;
  }
  // Judged before its weights came (or sent again after a restart).
  if (judged_.at(group).best_epoch() == epoch)
    best_[w.from] = {epoch, std::move(w.tensors)};
}

std::string best_epochs::finish(job_result& result) const {
  for (const auto& [group, selection] : judged_)
    if (selection.best_epoch() >= 0)
      result.best_epochs[group] = selection.best_epoch();
  if (result.stage_weights.empty())
    return "";
  for (const auto& w : result.stage_weights) {
    const auto group = judged_.find(group_of(w.from));
    const auto kept = best_.find(w.from);
    if (group == judged_.end() || kept == best_.end() ||
        kept->second.first != group->second.best_epoch())
      return "'" + w.from + "' sent no weights of its best epoch" +
             (group == judged_.end()
                ? std::string{}
                : " (epoch " + std::to_string(group->second.best_epoch() + 1) + ")");
  }
  for (auto& w : result.stage_weights)
    w.tensors = best_.at(w.from).second;
  result.saved_best = true;
  return "";
}

} // namespace runtime
} // namespace baton::actors
