#include "actors/modes/transfer/local.hpp"

#include <chrono>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/modes/transfer/stage.hpp"
#include "actors/modes/transfer/section.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "actors/runtime/local_run.hpp"
#include "messages/errc.hpp"
#include "model/core/checkpoint.hpp"
#include "model/transfer/reference.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

/// What the backbone did in this process, reported as its stage would.
messages::actor_report backbone_report(const model::frozen_backbone& backbone) {
  messages::actor_report rep;
  rep.actor = "backbone";
  rep.role = "stage";
  rep.node = "local";
  report_features(backbone, rep);
  return rep;
}

} // namespace

caf::expected<job_result> run_local(const topology& t, const run_request& r) {
  if (t.target_accuracy > 0 || t.runtime.stop_after_seconds > 0)
    spdlog::warn("--mode local of job: transfer runs every epoch (early_stopping aside): "
                 "target_accuracy and runtime.stop_after_seconds stop the actors' run only");
  at::set_num_threads(r.threads > 0 ? r.threads : cores());
  std::vector<model::head_spec> heads;
  for (const auto& h : section_of(t).heads)
    if (r.only_head.empty() || h.spec.name == r.only_head)
      heads.push_back(h.spec);
  if (heads.empty())
    return make_error(errc::bad_config, "--only-head " + r.only_head + ": no such head");
  try {
    auto started = std::chrono::steady_clock::now();
    auto data = load_data(t, t.data.train_limit);
    if (!data)
      return data.error();
    auto layers = model::make_model(t.backbone);
    if (!t.checkpoint.empty())
      model::load_checkpoint(layers, t.checkpoint);
    layers.set_trainable(false);
    layers.train(false);
    // Features computed (and cached) as the job's one stage computes them.
    model::frozen_backbone backbone{std::move(layers), section_of(t).features};
    auto training_started = training_starts();
    auto results = model::run_transfer_local(backbone, heads, *data, t.plan, t.selection,
                                             log_progress("local"));
    auto out = local_result(t, r.only_head.empty() ? "local" : r.only_head, started,
                            training_started);
    out.actors.push_back(backbone_report(backbone));
    for (const auto& h : results) {
      messages::actor_report rep;
      rep.actor = h.name;
      rep.role = "head";
      rep.task = h.task;
      rep.node = "local";
      rep.samples = h.samples;
      rep.train_loss = h.train_loss.empty() ? 0 : h.train_loss.back();
      rep.test_accuracy = h.test_accuracy.empty() ? 0 : h.test_accuracy.back();
      rep.weights_digest = h.weights_digest;
      for (size_t e = 0; e < h.train_loss.size(); ++e)
        rep.epochs.push_back({static_cast<int32_t>(e), h.train_loss[e], h.test_accuracy[e],
                              h.samples / static_cast<int64_t>(h.train_loss.size()),
                              e < h.validation_accuracy.size() ? h.validation_accuracy[e]
                                                               : -1.0});
      out.heads.push_back(rep);
      out.actors.push_back(rep);
      // As the head's actor sends them at the end (--save-model): with
      // save: best, those of its best epoch.
      out.stage_weights.push_back({"weights", h.name, 0, 0, 0, h.weights, {}});
      note_best_epoch(out, h.name, h.best_epoch, t.selection.keep_best);
    }
    out.stopped = early_stop_of(out, t.selection.patience);
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

caf::expected<job_result> run_separate(const topology& t, const run_request& r) {
  auto dir = make_work_directory("baton-baseline");
  if (!dir)
    return dir.error();
  owned_directory logs{*dir};
  const auto& heads = section_of(t).heads;
  auto threads = std::max<int32_t>(1, cores() / static_cast<int32_t>(heads.size()));
  auto started = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, child_process>> children;
  for (const auto& h : heads) {
    std::vector<std::string> argv{self_executable(), "run"};
    if (!r.topology_path.empty())
      argv.push_back(r.topology_path);
    for (const auto& o : r.overrides) {
      argv.push_back("--set");
      argv.push_back(o);
    }
    auto out = *dir + "/" + h.spec.name + ".json";
    argv.insert(argv.end(), {"--mode", "local", "--only-head", h.spec.name, "--threads",
                             std::to_string(threads), "--metrics-out", out});
    auto child = child_process::start(argv, *dir + "/" + h.spec.name + ".log");
    if (!child)
      return child.error();
    children.emplace_back(out, std::move(*child));
  }
  spdlog::info("baseline: {} separate processes ({} torch thread(s) each, logs in {})",
               children.size(), threads, *dir);
  job_result result;
  result.job = t.job;
  result.run = "separate";
  result.topology_file = t.file;
  for (auto& [out, child] : children) {
    while (child.running()) {
      if (r.interrupted && r.interrupted->load())
        return make_error(errc::interrupted, "stopping the baseline processes");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (auto code = child.wait(); code != 0)
      return make_error(errc::actor_failed, "baseline process failed (exit code " +
                                              std::to_string(code) + "); its log:\n" +
                                              child.log_tail());
    std::ifstream in{out};
    auto part = job_result_from_json(nlohmann::json::parse(in, nullptr, false));
    if (!part)
      return part.error();
    for (auto& h : part->heads)
      result.heads.push_back(h);
    for (auto& n : part->nodes)
      result.nodes.push_back(n);
    for (auto& a : part->actors)
      result.actors.push_back(a);
    // The processes train at the same time: the slowest one's time.
    result.train_seconds = std::max(result.train_seconds, part->train_seconds);
  }
  result.wall_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

caf::expected<job_result> run_without_actors(const topology& t, const run_request& r) {
  return r.baseline == "separate" ? run_separate(t, r) : run_local(t, r);
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
