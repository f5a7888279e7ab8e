#include "actors/runtime/result_collector.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <spdlog/spdlog.h>

namespace baton::actors {
inline namespace runtime {

namespace {

/// Epoch `e`'s test (or validation) accuracy of the members pooled: their
/// correct counts summed over the samples they evaluated (members that
/// counted none are left out); nullopt when none counted any.
std::optional<double> pooled_accuracy(const std::vector<messages::actor_report>& reports,
                                      size_t e, bool validation, int64_t& samples) {
  int64_t correct = 0;
  samples = 0;
  for (const auto& r : reports) {
    if (e >= r.epochs.size())
      continue;
    const auto& x = r.epochs[e];
    const int64_t n = validation ? x.validated : x.evaluated;
    const double accuracy = validation ? x.validation_accuracy : x.test_accuracy;
    if (n <= 0 || !(accuracy >= 0 && accuracy <= 1))
      continue;
    correct += std::llround(accuracy * static_cast<double>(n));
    samples += n;
  }
  if (samples == 0)
    return std::nullopt;
  return static_cast<double>(correct) / static_cast<double>(samples);
}

} // namespace

messages::actor_report merge_replica_reports(std::vector<messages::actor_report> reports) {
  std::sort(reports.begin(), reports.end(),
            [](const auto& a, const auto& b) { return a.actor < b.actor; });
  auto merged = reports.front();
  merged.actor = merged.actor.substr(0, merged.actor.find('.'));
  for (size_t i = 1; i < reports.size(); ++i) {
    merged.samples += reports[i].samples;
    for (size_t e = 0; e < merged.epochs.size() && e < reports[i].epochs.size(); ++e) {
      auto& into = merged.epochs[e];
      const auto& from = reports[i].epochs[e];
      auto samples = into.samples + from.samples;
      if (samples > 0)
        into.train_loss = (into.train_loss * into.samples + from.train_loss * from.samples) /
                          static_cast<double>(samples);
      into.samples = samples;
    }
  }
  // Members that split the evaluation (data-parallel workers) each count
  // their share; otherwise the first member's accuracy is the group's.
  bool last_pooled = false;
  for (size_t e = 0; e < merged.epochs.size(); ++e) {
    auto& into = merged.epochs[e];
    auto pooled = pooled_accuracy(reports, e, false, into.evaluated);
    if (pooled)
      into.test_accuracy = *pooled;
    last_pooled = pooled.has_value();
    if (auto validation = pooled_accuracy(reports, e, true, into.validated))
      into.validation_accuracy = *validation;
  }
  if (!merged.epochs.empty()) {
    merged.train_loss = merged.epochs.back().train_loss;
    if (last_pooled)
      merged.test_accuracy = merged.epochs.back().test_accuracy;
  }
  return merged;
}

namespace {

/// One report for the members of result group `group` (see
/// merge_replica_reports); a group of one is its member's report.
messages::actor_report merged(const std::string& group,
                              const std::vector<messages::actor_report>& reports) {
  if (reports.size() == 1)
    return reports.front();
  auto report = merge_replica_reports(reports);
  report.actor = group;
  return report;
}

} // namespace

void result_collector::final_report(messages::actor_report report) {
  const auto* planned = plan_.find(report.actor);
  auto group = planned == nullptr ? std::string{} : planned->result;
  if (!group.empty()) {
    auto& reports = group_finals_[group];
    reports.push_back(report);
    if (reports.size() == plan_.group_size(group))
      results_[group] = merged(group, reports);
  }
  actors_.push_back(std::move(report));
}

std::optional<messages::actor_report>
result_collector::epoch_report(const messages::actor_report& report, double seconds) {
  const auto* planned = plan_.find(report.actor);
  auto group = planned == nullptr ? std::string{} : planned->result;
  count_epoch_bytes(group.empty() ? report.actor : group, report);
  auto stamped = [&](messages::actor_report r) {
    for (const auto& e : r.epochs)
      epoch_seconds_[r.actor][e.epoch] = seconds;
    return r;
  };
  if (plan_.group_size(group) <= 1)
    return so_far(group, stamped(report));
  std::pair<std::string, int32_t> key{group, report.epochs.front().epoch};
  auto& reports = group_epochs_[key];
  reports.push_back(report);
  if (reports.size() < plan_.group_size(group))
    return std::nullopt;
  auto merged_report = merged(group, reports);
  group_epochs_.erase(key);
  return so_far(group, stamped(std::move(merged_report)));
}

void result_collector::count_epoch_bytes(const std::string& group,
                                         const messages::actor_report& report) {
  int64_t sent = 0;
  for (const auto& e : report.edges)
    sent += e.bytes;
  auto& before = bytes_sent_[report.actor];
  epoch_bytes_[group][report.epochs.front().epoch][report.actor] = sent - before;
  before = sent;
}

messages::actor_report result_collector::so_far(const std::string& group,
                                                messages::actor_report report) {
  if (group.empty())
    return report;
  auto& partial = partial_results_[group];
  auto epochs = std::move(partial.epochs);
  epochs.insert(epochs.end(), report.epochs.begin(), report.epochs.end());
  partial = report;
  partial.epochs = std::move(epochs);
  partial.samples = 0;
  for (const auto& e : partial.epochs)
    partial.samples += e.samples;
  if (!partial.epochs.empty()) {
    partial.train_loss = partial.epochs.back().train_loss;
    partial.test_accuracy = partial.epochs.back().test_accuracy;
  }
  return report;
}

void result_collector::weights(messages::tensor_set weights) {
  auto from = weights.from;
  weights_[from] = std::move(weights);
}

void result_collector::trained(const std::string& actor, int64_t trained, int64_t duplicates) {
  trained_[actor] = {trained, duplicates};
}

void result_collector::clear() {
  actors_.clear();
  trained_.clear();
  group_epochs_.clear();
  group_finals_.clear();
  results_.clear();
  partial_results_.clear();
  bytes_sent_.clear(); // the restarted actors count their bytes from 0
  weights_.clear();
}

void result_collector::finish(job_result& result) {
  result.mode = plan_.strategy.empty() ? result.job : plan_.strategy;
  result.result_label = plan_.result_label;
  result.settled = plan_.settled;
  result.actors.insert(result.actors.end(), std::make_move_iterator(actors_.begin()),
                       std::make_move_iterator(actors_.end()));
  for (auto& [actor, count] : trained_)
    result.trained[actor] = count;
  result.epoch_seconds = epoch_seconds_;
  for (const auto& [group, epochs] : epoch_bytes_)
    for (const auto& [epoch, members] : epochs)
      for (const auto& [member, bytes] : members)
        result.epoch_bytes[group][epoch] += bytes;
  for (const auto& a : plan_.actors) {
    if (auto it = results_.find(a.result); !a.result.empty() && it != results_.end()) {
      result.heads.push_back(std::move(it->second));
      results_.erase(it);
      partial_results_.erase(a.result);
    } else if (auto at = partial_results_.find(a.result); at != partial_results_.end()) {
      // Its final report never came (a lost node, a stop that gave up on
      // it): the epochs it completed are still its result.
      result.heads.push_back(std::move(at->second));
      partial_results_.erase(at);
    }
    if (auto it = weights_.find(a.name); a.sends_weights && it != weights_.end())
      result.stage_weights.push_back(std::move(it->second));
  }
  clear();
}

void log_epoch(const std::string& group, const messages::epoch_result& e,
               const std::string& advice) {
  spdlog::info("epoch {} {:<10} test accuracy {:6.2f}%{}  train loss {:.4f}  ({} samples)",
               e.epoch + 1, group, 100 * e.test_accuracy,
               e.validation_accuracy >= 0
                 ? fmt::format("  validation {:6.2f}%", 100 * e.validation_accuracy)
                 : std::string{},
               e.train_loss, e.samples);
  if (!std::isfinite(e.train_loss))
    spdlog::warn("{}: the training loss of epoch {} is not finite, training diverged; {}", group,
                 e.epoch + 1, advice.empty() ? "lower the optimizer's lr or momentum" : advice);
}

} // namespace runtime
} // namespace baton::actors
