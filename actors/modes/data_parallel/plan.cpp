#include "actors/modes/data_parallel/plan.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/ps_exchange.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

/// The largest message a worker sends: a bucket's longest ring chunk.
int64_t largest_chunk_bytes(const worker_settings& spec) {
  auto layout = model::make_flat_layout(make_worker_model(spec.model));
  int64_t most = 0;
  for (const auto& b : model::make_buckets(layout, spec.bucket_mb))
    most = std::max(most, model::ring_chunks(b.numel, spec.workers).front().size() * 4);
  return most;
}

constexpr int64_t max_message_bytes = int64_t{64} << 20;

/// exchange: ps: a shard's slice is one message each way, so it must fit in
/// 64 MiB, and every shard needs an element of its own.
caf::expected<void> check_shards(const topology& t, const worker_settings& spec) {
  auto layout = model::make_flat_layout(make_worker_model(spec.model));
  if (spec.shards > layout.numel)
    return make_error(errc::bad_config, t.file + ": data_parallel.shards is " +
                                          std::to_string(spec.shards) + " for a model of " +
                                          std::to_string(layout.numel) +
                                          " parameters (expected at most one shard each)");
  int64_t most = 0;
  for (const auto& part : shard_parts(layout, spec.shards))
    most = std::max(most, part.size() * 4);
  if (most > max_message_bytes)
    return make_error(errc::bad_config,
                      t.file + ": a shard's slice of " + std::to_string(most >> 20) +
                        " MiB exceeds the 64 MiB a message may carry (add "
                        "data_parallel.shards)");
  return {};
}

/// The messages of the exchange fit: ring chunks or shard slices.
caf::expected<void> check_messages(const topology& t, const worker_settings& spec) {
  if (spec.exchange == "ps")
    return check_shards(t, spec);
  auto bytes = largest_chunk_bytes(spec);
  if (spec.workers > 1 && bytes > max_message_bytes)
    return make_error(errc::bad_config,
                      t.file + ": a ring chunk of " + std::to_string(bytes >> 20) +
                        " MiB exceeds the 64 MiB a message may carry (lower "
                        "data_parallel.bucket_mb or add workers)");
  return {};
}

/// exchange: ps: S shard actors after the workers, and a peer edge from
/// every worker to every shard (index: the shard) and back (the worker).
void add_shards(job_plan& plan, const topology& t, const model::task& task) {
  const auto& settings = section_of(t);
  for (int32_t s = 0; s < settings.shards; ++s) {
    auto a = make_planned_actor("data_parallel_shard", shard_name(s),
                                settings.shard_nodes[static_cast<size_t>(s)],
                                to_yaml(shard_settings_of(t, task, s)));
    a.threads = 0;      // it sums and steps slices: no compute budget of its own
    a.trainable = true; // it checkpoints its slice (actors/roles/checkpointing.hpp)
    a.starts = true;    // an idle shard reports at its start
    plan.actors.push_back(std::move(a));
  }
  for (int32_t w = 0; w < settings.workers; ++w)
    for (int32_t s = 0; s < settings.shards; ++s) {
      plan.edges.push_back({planned_edge::kind_t::peer, worker_name(w), shard_name(s), s});
      plan.edges.push_back({planned_edge::kind_t::peer, shard_name(s), worker_name(w), w});
    }
}

/// Local SGD, the frozen prefix, the cache and the pretrained backbone.
void set_freezing(const section_spec& settings, const topology& t,
                  worker_settings& spec) {
  spec.sync_every = settings.sync_every;
  const auto& freeze = settings.freeze;
  spec.freeze_up_to = freeze.policy == "fixed" ? freeze.up_to : std::string{};
  if (freeze.policy == "adaptive")
    spec.freeze_groups = freeze.groups;
  spec.adaptive = freeze.adaptive;
  spec.cache = freeze.cache;
  spec.cache_mb = freeze.cache_mb;
  spec.checkpoint = t.checkpoint;
}

/// The divergence warning's advice: every worker's step is the lr (scaled
/// with W x batch_size under lr_scaling: linear) on the mean gradient of the
/// global batch (local SGD: of its own batch), so the lr, the momentum and
/// the batch are what a user changes.
std::string divergence_advice(const topology& t) {
  const auto& s = section_of(t);
  const int64_t global = s.workers * t.plan.batch_size;
  std::string lr = fmt::format("lr {:g}", s.optimizer.lr);
  if (s.lr_scaling == "linear")
    lr = fmt::format("lr {:g} (lr_scaling: linear, {:g} x {} / base_batch {}; it grows with the "
                     "workers and the batch)",
                     s.optimizer.lr * static_cast<double>(global) / s.base_batch, s.optimizer.lr,
                     global, s.base_batch);
  const std::string batch =
    s.sync_every > 0 ? fmt::format("each worker's own {} samples (local SGD)", t.plan.batch_size)
                     : fmt::format("{} workers x {} samples = {}", s.workers, t.plan.batch_size,
                                   global);
  const char* also = s.lr_scaling == "linear" ? "warmup_epochs to reach it gradually"
                                               : "data.batch_size raised";
  return fmt::format("job: data-parallel steps with {} and momentum {:g} on the mean gradient of "
                     "{}; lower data_parallel.optimizer.lr or momentum (or try {})",
                     lr, s.optimizer.momentum, batch, also);
}

} // namespace

worker_settings worker_settings_of(const topology& t, const model::task& task,
                                   int32_t worker) {
  const auto& settings = section_of(t);
  worker_settings spec;
  spec.worker = worker;
  spec.workers = settings.workers;
  spec.model = t.backbone;
  spec.model.classes = task.classes;
  spec.task = task;
  spec.data = make_source_settings(t);
  spec.optimizer = settings.optimizer;
  spec.linear_scaling = settings.lr_scaling == "linear";
  spec.base_batch = settings.base_batch;
  spec.warmup_epochs = settings.warmup_epochs;
  spec.bucket_mb = settings.bucket_mb;
  spec.overlap = settings.overlap;
  spec.exchange = settings.exchange;
  spec.shards = settings.shards;
  spec.max_staleness = settings.max_staleness;
  set_freezing(settings, t, spec);
  spec.threads = t.runtime.compute_threads;
  spec.progress_every = t.runtime.progress_every;
  return spec;
}

shard_settings shard_settings_of(const topology& t, const model::task& task,
                                 int32_t shard) {
  const auto worker = worker_settings_of(t, task, 0);
  shard_settings spec;
  spec.shard = shard;
  spec.shards = worker.shards;
  spec.workers = worker.workers;
  spec.model = worker.model;
  spec.freeze_up_to = worker.freeze_up_to;
  spec.data = worker.data;
  spec.optimizer = worker.optimizer;
  spec.linear_scaling = worker.linear_scaling;
  spec.base_batch = worker.base_batch;
  spec.warmup_epochs = worker.warmup_epochs;
  return spec;
}

caf::expected<job_plan> plan(const topology& t) {
  const auto* task = t.find_task(section_of(t).task);
  if (task == nullptr)
    return make_error(errc::bad_config, t.file + ": task '" + section_of(t).task +
                                          "' is not one of the topology's tasks");
  const auto& settings = section_of(t);
  try {
    if (auto fits = check_messages(t, worker_settings_of(t, *task, 0)); !fits)
      return std::move(fits.error());
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, t.file + ": cannot build the model: " + e.what());
  }
  job_plan plan;
  plan.divergence_advice = divergence_advice(t);
  plan.result_label = "workers";               // one result: the workers' merged reports
  plan.progress_shares = settings.workers;     // worker 0 reports its share of each step
  for (int32_t w = 0; w < settings.workers; ++w) {
    auto a = make_planned_actor("data_parallel_worker", worker_name(w),
                                settings.nodes[static_cast<size_t>(w)],
                                to_yaml(worker_settings_of(t, *task, w)));
    a.threads = t.runtime.compute_threads;
    a.trainable = true;
    a.starts = true;
    a.result = workers_group;
    a.sends_weights = w == 0;
    plan.actors.push_back(std::move(a));
  }
  if (settings.exchange == "ps") {
    add_shards(plan, t, *task);
    return plan;
  }
  for (int32_t w = 0; settings.workers > 1 && w < settings.workers; ++w) {
    int32_t next = model::ring_next(w, settings.workers);
    plan.edges.push_back({planned_edge::kind_t::peer, worker_name(w), worker_name(next), next});
  }
  return plan;
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
