#include "actors/runtime/local_run.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include <spdlog/spdlog.h>

#include "actors/flow/cpu_time.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/run_stop.hpp"
#include "actors/runtime/spawner.hpp"

namespace baton::actors {
inline namespace runtime {

caf::expected<model::data_splits> load_data(const topology& t, int64_t train_limit) {
  auto spec = make_source_settings(t);
  spec.data.train_limit = train_limit;
  return load_source_data(spec);
}

model::progress_fn log_progress(const std::string& what) {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [what, last](const std::string& name, int32_t epoch, int64_t samples, double loss) {
    auto now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::seconds(5))
      return;
    *last = now;
    spdlog::info("{} {}: epoch {} {} samples, loss {:.4f}", what, name, epoch + 1, samples, loss);
  };
}

training_start training_starts() {
  return {std::chrono::steady_clock::now(), process_cpu_seconds()};
}

job_result local_result(const topology& t, const std::string& node,
                        std::chrono::steady_clock::time_point started,
                        const training_start& training) {
  auto ended = std::chrono::steady_clock::now();
  job_result out;
  out.job = t.job;
  out.run = "local";
  out.nodes.push_back(current_node_report(node));
  out.nodes.back().cpu_seconds = std::max(0.0, process_cpu_seconds() - training.cpu_seconds);
  out.wall_seconds = std::chrono::duration<double>(ended - started).count();
  out.train_seconds = std::chrono::duration<double>(ended - training.time).count();
  return out;
}

int64_t warm_up_samples(const topology& t, int64_t global_batch) {
  return static_cast<int64_t>(t.runtime.progress_every) * global_batch;
}

void set_steady(job_result& out, const std::optional<model::steady_span>& steady) {
  if (steady && steady->samples > 0 && steady->seconds > 0)
    out.steady = steady;
}

messages::actor_report local_group(const std::string& group, const std::string& role,
                                   const std::string& task, int64_t samples,
                                   const std::vector<double>& train_loss,
                                   const std::vector<double>& test_accuracy,
                                   const std::vector<double>& validation_accuracy,
                                   const std::string& digest) {
  messages::actor_report r;
  r.actor = group;
  r.role = role;
  r.task = task;
  r.node = "local";
  r.samples = samples;
  r.weights_digest = digest;
  const auto epochs = static_cast<int64_t>(train_loss.size());
  for (int64_t e = 0; e < epochs; ++e)
    r.epochs.push_back({static_cast<int32_t>(e), train_loss[e], test_accuracy[e],
                        samples / epochs,
                        e < static_cast<int64_t>(validation_accuracy.size())
                          ? validation_accuracy[e]
                          : -1.0});
  if (!r.epochs.empty()) {
    r.train_loss = r.epochs.back().train_loss;
    r.test_accuracy = r.epochs.back().test_accuracy;
  }
  return r;
}

std::optional<early_stop> early_stop_of(const job_result& out, int32_t patience) {
  run_stop stop{0, 0, out.heads.size(), patience};
  // Epoch by epoch, every result's, as their reports would come.
  for (int32_t epoch = 0;; ++epoch) {
    bool any = false;
    for (const auto& h : out.heads)
      for (const auto& e : h.epochs) {
        if (e.epoch != epoch)
          continue;
        any = true;
        const auto seconds = out.epoch_seconds.find(h.actor);
        const double at = seconds != out.epoch_seconds.end() && seconds->second.count(epoch)
                            ? seconds->second.at(epoch)
                            : 0.0;
        if (auto stopped = stop.epoch(h.actor, epoch, e.test_accuracy, at, e.validation_accuracy))
          return stopped;
      }
    if (!any)
      return std::nullopt;
  }
}

void note_best_epoch(job_result& out, const std::string& group, int32_t best_epoch, bool kept) {
  if (best_epoch < 0)
    return;
  out.best_epochs[group] = best_epoch;
  out.saved_best = out.saved_best || kept;
}

} // namespace runtime
} // namespace baton::actors
