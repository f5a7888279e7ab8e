#include "actors/runtime/jobs.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/config/default_topology.hpp"
#include "actors/flow/trace.hpp"
#include "actors/modes/pipeline/planning.hpp"
#include "actors/net/framed_transport.hpp"
#include "actors/roles/source.hpp"
#include "actors/runtime/child_process.hpp"
#include "actors/runtime/coordinator.hpp"
#include "actors/runtime/local_cluster.hpp"
#include "actors/runtime/run_outputs.hpp"
#include "actors/runtime/spawner.hpp"
#include "actors/runtime/system.hpp"
#include "messages/errc.hpp"
#include "model/checkpoint.hpp"
#include "model/dataset.hpp"
#include "model/error.hpp"
#include "model/local.hpp"
#include "model/stage_trainer.hpp"
#include "model/task.hpp"

namespace baton::actors {

namespace {

namespace fs = std::filesystem;

int32_t cores() {
  return std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

system_settings settings_of(const topology& t) {
  return {t.runtime.scheduler_threads, t.runtime.heartbeat_interval,
          t.runtime.connection_timeout, t.runtime.tls};
}

/// The topology's train and test splits, exactly as its source reads them.
caf::expected<std::pair<model::dataset, model::dataset>> load_data(const topology& t,
                                                                   int64_t train_limit) {
  auto spec = make_source_spec(t);
  spec.train_limit = train_limit;
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

// -- the local loop (--mode local): one process, no actors --------------------

caf::expected<job_result> run_local(const topology& t, const run_request& r) {
  at::set_num_threads(r.threads > 0 ? r.threads : cores());
  std::vector<model::head_spec> heads;
  for (const auto& h : t.heads)
    if (r.only_head.empty() || h.spec.name == r.only_head)
      heads.push_back(h.spec);
  if (heads.empty())
    return make_error(errc::bad_config, "--only-head " + r.only_head + ": no such head");
  try {
    auto started = std::chrono::steady_clock::now();
    auto data = load_data(t, t.train_limit);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    auto backbone = model::make_model(t.backbone);
    if (!t.checkpoint.empty())
      model::load_checkpoint(backbone, t.checkpoint);
    backbone.set_trainable(false);
    backbone.train(false);
    auto training_started = std::chrono::steady_clock::now();
    auto results = model::run_transfer_local(backbone, heads, train, test, t.plan,
                                             log_progress("local"));
    auto ended = std::chrono::steady_clock::now();
    job_result out;
    out.wall_seconds = std::chrono::duration<double>(ended - started).count();
    out.train_seconds = std::chrono::duration<double>(ended - training_started).count();
    out.mode = "local";
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
                              h.samples / static_cast<int64_t>(h.train_loss.size())});
      out.heads.push_back(rep);
      out.actors.push_back(rep);
    }
    out.nodes.push_back(current_node_report(r.only_head.empty() ? "local" : r.only_head));
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

// -- the local pipeline reference (--mode local, job: pipeline) ----------------

/// Trains the pipeline's whole model as one stage: the same microbatches in
/// the same order, the same arithmetic; per-stage digests are taken by slicing
/// the model at the pipeline's boundaries, so they compare with the stages'.
caf::expected<job_result> run_pipeline_local(const topology& t, const run_request& r) {
  // The stages' thread budget by default: then the arithmetic is the same
  // bit for bit (OpenBLAS sums in another order with more threads).
  at::set_num_threads(r.threads > 0 ? r.threads : t.runtime.stage_threads);
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task is not a task of the topology");
  try {
    auto started = std::chrono::steady_clock::now();
    auto data = load_data(t, t.train_limit);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    model::stage_trainer trainer{whole, t.pretrain.optimizer, model::stash_mode::stash};
    bool flush = t.schedule != "1f1b";
    messages::actor_report last;
    auto training_started = std::chrono::steady_clock::now();
    for (int32_t epoch = 0; epoch < t.plan.epochs; ++epoch) {
      auto plan = model::plan_epoch(train.size(), t.plan, epoch);
      double loss_sum = 0;
      int64_t samples = 0;
      int32_t in_step = 0;
      for (size_t k = 0; k < plan.microbatches.size(); ++k) {
        auto [x, y] = model::gather(train, plan.microbatches[k]);
        auto size = plan.step_size_of[k];
        trainer.forward(static_cast<int64_t>(k), x, true);
        auto b = trainer.backward_loss(static_cast<int64_t>(k), model::apply(*task, y),
                                       flush ? size : 1);
        loss_sum += b.loss * x.size(0);
        samples += x.size(0);
        if (!flush || ++in_step == size) {
          trainer.step();
          in_step = 0;
        }
      }
      int64_t correct = 0;
      for (const auto& ids : model::plan_eval(test.size(), t.plan.batch_size)) {
        auto [x, y] = model::gather(test, ids);
        correct += trainer.infer(x).argmax(1).eq(model::apply(*task, y)).sum().item<int64_t>();
      }
      double accuracy = test.size() ? static_cast<double>(correct) / test.size() : 0.0;
      last.epochs.push_back({epoch, samples ? loss_sum / samples : 0.0, accuracy, samples});
      last.samples += samples;
      spdlog::info("local pipeline reference: epoch {} test accuracy {:.2f}%", epoch + 1,
                   100 * accuracy);
    }
    job_result out;
    out.job = "pipeline";
    out.mode = "local";
    for (size_t i = 0; i < t.pipeline.size(); ++i) {
      messages::actor_report stage;
      stage.actor = "stage" + std::to_string(i);
      stage.role = "pipeline_stage";
      stage.node = "local";
      auto slice = whole.slice(t.pipeline[i].begin, t.pipeline[i].end);
      stage.weights_digest = model::weights_digest(slice);
      messages::tensor_set weights{"weights", stage.actor, 0, trainer.version(), 0, {}, {}};
      for (const auto& p : slice.state())
        weights.tensors.push_back(p.detach());
      out.stage_weights.push_back(std::move(weights));
      if (i + 1 == t.pipeline.size()) {
        stage.task = task->name;
        stage.samples = last.samples;
        stage.epochs = last.epochs;
        stage.train_loss = last.epochs.empty() ? 0 : last.epochs.back().train_loss;
        stage.test_accuracy = last.epochs.empty() ? 0 : last.epochs.back().test_accuracy;
        out.heads.push_back(stage);
      }
      out.actors.push_back(stage);
    }
    out.nodes.push_back(current_node_report("local"));
    auto ended = std::chrono::steady_clock::now();
    out.wall_seconds = std::chrono::duration<double>(ended - started).count();
    out.train_seconds = std::chrono::duration<double>(ended - training_started).count();
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, e.what());
  }
}

// -- the actor run: embedded, on listed nodes, or on local nodes --------------

caf::expected<job_result> run_actors(topology t, const run_request& r) {
  // `backbone.split: auto`: profiled and planned here, before any process or actor starts.
  if (auto planned = resolve_backbone_split(t, r.local_nodes); !planned)
    return planned.error();
  auto record = request_record(r);
  if (!record)
    return record.error();
  // Checkpoints nobody asked to keep go to a directory of this run's, removed
  // when the run ends, failed or not, after its nodes stopped (a node of a
  // failed run may still be writing one): a resumable run names its directory.
  std::optional<owned_directory> checkpoints;
  if (t.runtime.checkpoint_every > 0 && t.runtime.checkpoint_dir.empty() &&
      r.resume_dir.empty()) {
    auto dir = make_work_directory("baton-checkpoints");
    if (!dir)
      return dir.error();
    checkpoints.emplace(*dir);
  }
  std::optional<local_cluster> cluster;
  std::optional<owned_directory> logs;
  if (r.local_nodes > 0) {
    auto dir = make_work_directory("baton-nodes");
    if (!dir)
      return dir.error();
    logs.emplace(*dir);
    t = with_local_nodes(std::move(t), r.local_nodes);
    auto started = local_cluster::start(r.local_nodes, settings_of(t), *dir);
    if (!started)
      return started.error();
    cluster = std::move(*started);
    t = cluster->place(std::move(t));
    spdlog::info("started {} local nodes (logs in {}, removed after a successful run)",
                 r.local_nodes, *dir);
  }
  caf::actor_system_config cfg;
  configure(cfg, settings_of(t));
  caf::actor_system sys{cfg};
  install_framed_transport(sys); // BASP's own port checks frame lengths too
  run_options options;
  options.progress_tty = r.progress_tty;
  options.interrupted = r.interrupted;
  options.trace = !r.trace_out.empty();
  options.resume_dir = r.resume_dir;
  options.record = *record;
  if (checkpoints)
    options.temporary_checkpoint_dir = checkpoints->path();
  auto result = run_actor_job(sys, t, options);
  if (cluster)
    cluster->stop();
  if (!result && logs) {
    logs->keep();
    spdlog::info("the local nodes' logs are kept in {}", logs->path());
  }
  return result;
}

// -- the separate baseline: K processes, one per head -------------------------

caf::expected<job_result> run_separate(const topology& t, const run_request& r) {
  auto dir = make_work_directory("baton-baseline");
  if (!dir)
    return dir.error();
  owned_directory logs{*dir};
  auto threads = std::max<int32_t>(1, cores() / static_cast<int32_t>(t.heads.size()));
  auto started = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, child_process>> children;
  for (const auto& h : t.heads) {
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
  result.mode = "separate";
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

} // namespace

caf::expected<std::string> fault_override(const std::string& text) {
  std::string entries;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size())
      return make_error(errc::bad_config,
                        "--fault " + text + ": expected key=value,... (for example "
                        "kind=kill_node,node=n2,at_step=10)");
    entries += (entries.empty() ? "" : ", ") + item.substr(0, equals) + ": " +
               item.substr(equals + 1);
  }
  return "faults.+={" + entries + "}";
}

namespace {

/// The built-in default keeps its checkpoint where configs/transfer.yaml does.
std::vector<std::string> with_default_checkpoint(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"backbone.checkpoint=" BATON_SOURCE_DIR
                               "/build/checkpoints/convnet-pretrained.pt"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return all;
}

/// The topology of `record`: the text it was started with, its overrides.
caf::expected<topology> load_recorded(const run_record& record) {
  if (record.topology_file.empty())
    return parse_topology(record.topology_text, embedded_topology_name,
                          with_default_checkpoint(record.overrides));
  return parse_topology_as(record.topology_text, record.topology_file, record.overrides);
}

/// Whether DIR has a run record (checkpoints of an older baton have none).
bool has_run_record(const std::string& dir) {
  std::error_code ec;
  return fs::exists(run_record_path(dir), ec);
}

/// `--resume DIR`: the recorded run's topology and options (request_record);
/// its training settings must be those of the recorded run.
caf::expected<topology> load_resumed_topology(const run_request& r) {
  if (!has_run_record(r.resume_dir)) {
    spdlog::warn("--resume {}: no {} (checkpoints of an older baton): the topology and --set "
                 "options must be those of the run that wrote them",
                 r.resume_dir, run_record_path(r.resume_dir));
    run_request as_given = r;
    as_given.resume_dir.clear();
    return load_request_topology(as_given);
  }
  auto then = read_run_record(r.resume_dir);
  auto now = request_record(r);
  if (!then)
    return then.error();
  if (!now)
    return now.error();
  auto name = [](const run_record& x) {
    return x.topology_file.empty() ? std::string{embedded_topology_name} : x.topology_file;
  };
  auto then_values = topology_values(then->topology_text, name(*then), then->overrides);
  if (!then_values)
    return then_values.error();
  auto now_values = topology_values(now->topology_text, name(*now), now->overrides);
  if (!now_values)
    return now_values.error();
  auto difference = settings_difference(training_settings(*then_values),
                                        training_settings(*now_values));
  if (!difference.empty())
    return make_error(errc::bad_config,
                      "--resume " + r.resume_dir + ": the checkpoints were trained with other "
                      "settings (" + difference + "); a resumed run may change runtime, "
                      "faults, nodes and placement only (the run's settings are in " +
                      run_record_path(r.resume_dir) + ")");
  return load_recorded(*now);
}

} // namespace

caf::expected<run_record> request_record(const run_request& r) {
  auto record = make_run_record(r.topology_path, default_topology_yaml, r.overrides);
  if (!record || r.resume_dir.empty() || !has_run_record(r.resume_dir))
    return record;
  auto then = read_run_record(r.resume_dir);
  if (!then)
    return then.error();
  if (r.topology_path.empty()) {
    record->topology_file = then->topology_file;
    record->topology_text = then->topology_text;
  }
  record->overrides.insert(record->overrides.begin(), then->overrides.begin(),
                           then->overrides.end());
  return record;
}

caf::expected<topology> load_request_topology(const run_request& r) {
  if (!r.resume_dir.empty())
    return load_resumed_topology(r);
  if (!r.topology_path.empty())
    return load_topology(r.topology_path, r.overrides);
  return parse_topology(default_topology_yaml, embedded_topology_name,
                        with_default_checkpoint(r.overrides));
}

caf::expected<void> ensure_pretrained(const topology& t, bool force) {
  if (t.checkpoint.empty() || (!force && fs::exists(t.checkpoint)))
    return caf::unit;
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr)
    return make_error(errc::bad_config, "backbone.pretrain.task '" + t.pretrain.task +
                                          "' is not one of the topology's tasks");
  spdlog::info("no pretrained backbone at {}: pre-training {} on task {} ({} samples, {} "
               "epoch(s)) first",
               t.checkpoint, t.backbone.name, task->name, t.pretrain.train_limit,
               t.pretrain.epochs);
  at::set_num_threads(cores());
  try {
    auto data = load_data(t, t.pretrain.train_limit);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    model::pretrain_spec spec{t.backbone, *task, t.pretrain.optimizer, t.plan, t.checkpoint};
    spec.plan.epochs = t.pretrain.epochs;
    auto accuracy = model::pretrain(spec, train, test, log_progress("pretrain"));
    spdlog::info("pretrained backbone written to {} (test accuracy {:.2f}% on {})",
                 t.checkpoint, 100 * accuracy, task->name);
    return caf::unit;
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, std::string{"pre-training failed: "} + e.what());
  }
}

/// The whole trained model of a pipeline run (its stages' weights in order),
/// saved as a checkpoint of backbone + fc2: the form `baton pretrain` writes
/// and a transfer job's `backbone.checkpoint` reads.
caf::expected<void> save_pipeline_model(const topology& t, const job_result& result,
                                        const std::string& path) {
  const auto* task = t.find_task(t.pretrain.task);
  if (task == nullptr || result.stage_weights.size() != t.pipeline.size())
    return make_error(errc::actor_failed,
                      "cannot save the model: " + std::to_string(result.stage_weights.size()) +
                        " of " + std::to_string(t.pipeline.size()) + " stages sent their weights");
  try {
    auto whole = model::make_pretrain_model(t.backbone, task->classes);
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < t.pipeline.size(); ++i) {
      auto state = whole.slice(t.pipeline[i].begin, t.pipeline[i].end).state();
      const auto& sent = result.stage_weights[i].tensors;
      if (sent.size() != state.size())
        return make_error(errc::actor_failed,
                          "cannot save the model: stage " + std::to_string(i) + " sent " +
                            std::to_string(sent.size()) + " tensors for " +
                            std::to_string(state.size()) + " parameters and buffers");
      for (size_t p = 0; p < state.size(); ++p)
        if (!sent[p].defined() || !sent[p].sizes().equals(state[p].sizes()) ||
            sent[p].scalar_type() != state[p].scalar_type())
          return make_error(errc::actor_failed, "cannot save the model: stage " +
                                                  std::to_string(i) + " sent tensor " +
                                                  std::to_string(p) + " of the wrong shape");
      for (size_t p = 0; p < state.size(); ++p)
        state[p].copy_(sent[p]);
    }
    model::save_checkpoint(whole, path);
    return {};
  } catch (const std::exception& e) {
    return make_error(errc::bad_file, "cannot save the model to " + path + ": " + e.what());
  }
}

caf::expected<job_result> run_job(const run_request& r) {
  auto t = load_request_topology(r);
  if (!t)
    return t.error();
  auto outputs = std::vector<output_file>{{"--metrics-out", r.metrics_out},
                                          {"--trace", r.trace_out},
                                          {"--save-model", r.save_model}};
  auto inputs = std::vector<std::string>{t->file, t->checkpoint, t->backbone.path};
  if (!r.resume_dir.empty())
    inputs.push_back(run_record_path(r.resume_dir));
  if (auto err = check_outputs(outputs, inputs))
    return err;
  // A pipeline trains the backbone itself: it needs no pretrained one.
  if (t->job != "pipeline")
    if (auto ok = ensure_pretrained(*t); !ok)
      return ok.error();
  caf::expected<job_result> result = make_error(errc::bad_config, "no job ran");
  if (!r.trace_out.empty() && (t->job != "pipeline" || !r.mode.empty()))
    return make_error(errc::bad_config, "--trace records the stage actors of job: pipeline "
                                        "(not --mode local, not job: transfer)");
  if (!r.save_model.empty() && t->job != "pipeline")
    return make_error(errc::bad_config, "--save-model saves what job: pipeline trained; a "
                                        "transfer job's heads are in its metrics");
  if (t->job == "pipeline" && !r.baseline.empty())
    return make_error(errc::bad_config, "--baseline applies to job: transfer only");
  if (r.mode == "local" && t->job == "pipeline")
    result = run_pipeline_local(*t, r);
  else if (r.mode == "local")
    result = run_local(*t, r);
  else if (!r.mode.empty())
    return make_error(errc::bad_config, "--mode " + r.mode + ": only 'local' is known");
  else if (r.baseline == "separate")
    result = run_separate(*t, r);
  else if (!r.baseline.empty())
    return make_error(errc::bad_config, "--baseline " + r.baseline + ": only 'separate' is known");
  else
    result = run_actors(*t, r);
  return result;
}

caf::error write_outputs(const run_request& r, const job_result& result) {
  if (!r.metrics_out.empty())
    if (auto ok = write_metrics(result, r.metrics_out); !ok)
      return ok.error();
  if (!r.trace_out.empty())
    if (auto err = write_chrome_trace(r.trace_out, result.actors))
      return err;
  if (!r.save_model.empty()) {
    auto t = load_request_topology(r);
    if (!t)
      return t.error();
    if (auto ok = save_pipeline_model(*t, result, r.save_model); !ok)
      return ok.error();
  }
  return caf::none;
}

} // namespace baton::actors
