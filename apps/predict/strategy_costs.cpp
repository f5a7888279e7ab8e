#include "apps/predict/strategy_costs.hpp"

#include <algorithm>
#include <future>

#include "actors/modes/backbone_split.hpp"
#include "actors/modes/data_parallel/local.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/planning.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/local_run.hpp"
#include "actors/modes/pipeline/section.hpp"
#include "apps/predict/link_calibration.hpp"
#include "messages/errc.hpp"
#include "model/core/dataset.hpp"
#include "model/core/layered_model.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::apps {

namespace {

using actors::topology;

/// The samples of a split as a run reads them (after its limit; the
/// training split less its validation), from the data's headers, for every
/// kind (an npy workload's evaluation had been predicted at 0: no size known
/// but Fashion-MNIST's); the limit, else 0, where they cannot be read (the
/// run says why).
int64_t split_size(const topology& t, model::split which) {
  try {
    return model::data_size(t.data, which);
  } catch (const std::exception&) { // model::file_error, model::error
    return which == model::split::train ? t.data.train_limit : t.data.test_limit;
  }
}

using actors::trained_model;
using actors::trained_model_of;

/// The least time a prediction's profile times its microbatches for: IST's
/// network of configs/ist.yaml at 32 samples (5 ms a pass) read 5.2-7.5 ms
/// (mean 6.2) over 10 microbatches in eight profiles, 5.1-5.7 ms (mean 5.3)
/// over 200; a model whose 10 microbatches take longer is timed as before.
constexpr double profile_seconds = 0.5;

std::string key_of(const trained_model& m, const std::vector<int64_t>& shape, int64_t batch,
                   int32_t threads) {
  std::string key = m.spec.name + "/" + m.optimizer.name + "/" + std::to_string(batch) + "/" +
                    std::to_string(m.spec.classes) + "/" + std::to_string(m.spec.wide_features);
  if (threads != 1)
    key += "/t" + std::to_string(threads);
  for (int64_t x : shape)
    key += "x" + std::to_string(x);
  for (int64_t h : m.spec.hidden)
    key += "h" + std::to_string(h);
  return key;
}

caf::error refuse(const std::string& name, const std::string& why) {
  return make_error(errc::bad_config, "baton predict: " + name + ": " + why);
}

/// The index after the layer `name` (a frozen prefix's length).
caf::expected<size_t> prefix_through(const std::string& strategy, const std::string& name,
                                     const std::vector<cost::layer_profile>& layers) {
  for (size_t k = 0; k < layers.size(); ++k)
    if (layers[k].name == name)
      return k + 1;
  return refuse(strategy, "freeze.up_to '" + name + "' is no layer of the profiled model");
}

/// data-parallel: the ring, the ps or local SGD, with its frozen prefix.
/// An adaptive prefix changes as it trains: predicted unfrozen (its
/// slowest case), and said so in docs/cost-model.md.
caf::expected<cost::strategy> data_parallel_of(const std::string& name, const topology& t,
                                               const cost::workload& w, int32_t& hosts) {
  const auto& s = actors::data_parallel::section_of(t);
  hosts = s.workers;
  cost::freezing freeze;
  if (s.freeze.policy == "fixed") {
    auto prefix = prefix_through(name, s.freeze.up_to, w.layers);
    if (!prefix)
      return prefix.error();
    freeze.frozen_layers = *prefix;
    freeze.cache = s.freeze.cache;
  }
  if (s.workers == 1)
    return cost::strategy{cost::local_strategy{freeze}};
  if (s.exchange == "ps") {
    if (s.max_staleness > 0)
      return refuse(name, "bounded staleness (max_staleness > 0) is not modelled");
    return cost::strategy{cost::ps_strategy{freeze, s.shards}};
  }
  if (s.sync_every > 0)
    return cost::strategy{cost::local_sgd_strategy{freeze, s.sync_every, s.bucket_mb}};
  return cost::strategy{cost::ring_strategy{freeze, s.bucket_mb, s.overlap}};
}

caf::expected<cost::strategy> pipeline_of(const std::string& name, const topology& t,
                                          int32_t& hosts) {
  const auto& s = actors::pipeline::section_of(t);
  cost::pipeline_strategy p;
  p.microbatches = t.plan.microbatches;
  if (s.schedule == "gpipe")
    p.schedule = cost::pipeline_schedule::gpipe;
  else if (s.schedule == "1f1b-flush")
    p.schedule = cost::pipeline_schedule::one_f_one_b_flush;
  else if (s.schedule == "1f1b" || s.schedule == "1f1b-dynamic")
    p.schedule = cost::pipeline_schedule::one_f_one_b;
  else
    return refuse(name, "pipeline schedule '" + s.schedule + "' is not modelled");
  if (s.stages_auto)
    return cost::strategy{p}; // the planner's: the fastest straight pipeline on the hosts
  hosts = 0;
  for (const auto& stage : s.stages) {
    p.stage_ends.push_back(stage.end);
    p.replicas.push_back(stage.replicas);
    hosts += stage.replicas;
  }
  return cost::strategy{p};
}

caf::expected<cost::strategy> ist_of(const std::string& name, const topology& t, int32_t& hosts) {
  const auto& s = actors::ist::section_of(t);
  if (s.kind != "ist")
    return refuse(name, "ist.kind '" + s.kind + "' is not modelled (only kind: ist, an mlp)");
  hosts = s.workers;
  cost::ist_strategy x;
  x.shards = s.shards;
  x.local_steps = s.local_steps;
  x.mlp_inputs = t.backbone.in_channels * t.backbone.in_height * t.backbone.in_width;
  x.mlp_hidden = s.hidden;
  x.mlp_classes = trained_model_of(t).spec.classes;
  return cost::strategy{x};
}

/// The strategy for other host counts: shards that were one per host stay
/// one per host; a pipeline's stages are chosen again for W hosts.
cost::strategy projected_of(cost::strategy s, int32_t hosts) {
  if (auto* ps = std::get_if<cost::ps_strategy>(&s); ps && ps->shards == hosts)
    ps->shards = 0;
  if (auto* ist = std::get_if<cost::ist_strategy>(&s); ist && ist->shards == hosts)
    ist->shards = 0;
  if (auto* p = std::get_if<cost::pipeline_strategy>(&s)) {
    p->stage_ends.clear();
    p->replicas.clear();
  }
  return s;
}

/// The layers' times scaled so that their forwards, backwards and updates
/// sum to `step` (a step timed whole); their split kept.
void scale_to_step(cost::workload& w, double step) {
  double sum = 0;
  for (const auto& l : w.layers)
    sum += l.forward_seconds + l.backward_seconds + l.update_seconds;
  if (sum <= 0 || step <= 0)
    return;
  const double scale = step / sum;
  for (auto& l : w.layers) {
    l.forward_seconds *= scale;
    l.backward_seconds *= scale;
    l.update_seconds *= scale;
  }
}

} // namespace

caf::expected<model::model_profile> profile_cache::of(const topology& t, int64_t batch,
                                                      int32_t threads, int32_t copies) {
  const trained_model m = trained_model_of(t);
  const auto shape = actors::sample_shape_of(t);
  std::string key = key_of(m, shape, batch, threads);
  if (copies > 1)
    key += "/c" + std::to_string(copies);
  if (auto found = made_.find(key); found != made_.end())
    return found->second;
  if (!file_.empty()) {
    auto p = actors::load_profile(file_);
    if (!p)
      return p.error();
    if (p->profile.model == m.spec.name)
      return made_[key] = p->profile;
  }
  model::profile_options options;
  options.microbatch_size = batch;
  options.sample_shape = shape;
  options.threads = threads;
  options.seed = t.seed;
  options.optimizer = m.optimizer;
  options.min_timed_seconds = profile_seconds;
  // A run's step is the mean of its steps: the layers' means predict it (the
  // planner's medians read 2-9% short on this shared host).
  options.statistic = model::profile_statistic::mean;
  auto make = [m, options, copies] {
    auto profile_one = [&] {
      return model::profile_model(actors::build_trained_model(m), options);
    };
    std::vector<std::future<model::model_profile>> others;
    for (int32_t k = 1; k < copies; ++k)
      others.push_back(std::async(std::launch::async, profile_one));
    auto profile = profile_one();
    for (auto& other : others)
      other.get();
    profile.model = m.spec.name;
    return profile;
  };
  try {
    auto profile = make();
    makers_[key] = make;
    taken_[key] = {profile};
    return made_[key] = profile;
  } catch (const std::exception& e) { // model::error, c10::Error
    return make_error(errc::bad_config, t.file + ": cannot profile the model " + m.spec.name +
                                          ": " + e.what());
  }
}

namespace {

/// Each figure's median over `timings`.
actors::ist::round_timing median_of_rounds(const std::vector<actors::ist::round_timing>& timings) {
  auto median = [&](auto figure) {
    std::vector<double> v;
    for (const auto& t : timings)
      v.push_back(figure(t));
    return median_of(std::move(v));
  };
  actors::ist::round_timing m;
  m.step = median([](const auto& t) { return t.step; });
  m.round.assemble = median([](const auto& t) { return t.round.assemble; });
  m.round.split = median([](const auto& t) { return t.round.split; });
  m.round.partition = median([](const auto& t) { return t.round.partition; });
  m.round.take = median([](const auto& t) { return t.round.take; });
  m.round.put = median([](const auto& t) { return t.round.put; });
  return m;
}

} // namespace

caf::expected<actors::ist::round_timing> profile_cache::round_of(const topology& t, int64_t batch,
                                                                 int32_t workers, int32_t shards,
                                                                 int32_t copies) {
  const auto& section = actors::ist::section_of(t);
  const trained_model m = trained_model_of(t);
  model::ist::shape shape;
  shape.inputs = t.backbone.in_channels * t.backbone.in_height * t.backbone.in_width;
  shape.hidden = section.hidden;
  shape.classes = m.spec.classes;
  std::string key = "ist/" + std::to_string(batch) + "/w" + std::to_string(workers) + "/s" +
                    std::to_string(shards) + "/c" + std::to_string(copies) + "/l" +
                    std::to_string(section.local_steps) + "/i" + std::to_string(shape.inputs) +
                    "/k" + std::to_string(shape.classes);
  for (int64_t h : shape.hidden)
    key += "h" + std::to_string(h);
  if (auto found = rounds_taken_.find(key); found != rounds_taken_.end())
    return median_of_rounds(found->second);
  auto make = [=, optimizer = section.optimizer, steps = section.local_steps] {
    return actors::ist::time_round(shape, workers, shards, steps, batch, optimizer, copies);
  };
  try {
    rounds_taken_[key] = {make()};
    round_makers_[key] = make;
    return rounds_taken_[key].front();
  } catch (const std::exception& e) { // model::error, c10::Error
    return make_error(errc::bad_config, t.file + ": cannot time a round of IST: " + e.what());
  }
}

caf::expected<double> profile_cache::loop_step(const std::string& key,
                                              std::function<caf::expected<double>()> time) {
  auto& taken = loop_steps_taken_[key];
  if (taken.empty()) {
    auto step = time();
    if (!step)
      return step.error();
    taken.push_back(*step);
    loop_step_makers_[key] = [time] {
      auto again = time();
      return again ? *again : 0.0;
    };
  }
  return median_of(taken);
}

caf::expected<double> profile_cache::local_step_of(const topology& t, int32_t threads) {
  const auto& section = actors::data_parallel::section_of(t);
  const trained_model m = trained_model_of(t);
  const std::string key = "local/" + m.spec.name + "/b" + std::to_string(t.plan.batch_size) +
                          "/w" + std::to_string(section.workers) + "/t" +
                          std::to_string(threads) + "/" + m.optimizer.name;
  return loop_step(key, [t, threads] { return actors::data_parallel::time_local_step(t, threads); });
}

caf::expected<double> profile_cache::whole_step_of(const topology& t, int64_t batch,
                                                  int32_t copies) {
  const trained_model m = trained_model_of(t);
  const auto shape = actors::sample_shape_of(t);
  const std::string key = "whole/" + key_of(m, shape, batch, 1) + "/c" + std::to_string(copies);
  return loop_step(key, [m, shape, batch, copies, file = t.file]() -> caf::expected<double> {
    model::data_parallel_settings spec;
    spec.batch_size = batch;
    spec.optimizer = m.optimizer;
    try {
      return model::time_whole_step([&m] { return actors::build_trained_model(m); }, spec, shape,
                                    m.spec.classes, copies, model::timed_loop_seconds);
    } catch (const std::exception& e) { // model::error, c10::Error
      return make_error(errc::bad_config,
                        file + ": cannot time a step of the model " + m.spec.name + ": " + e.what());
    }
  });
}

void profile_cache::profile_again() {
  for (const auto& [key, make] : makers_) {
    try {
      taken_[key].push_back(make());
    } catch (const std::exception&) { // profiled once already: keep those
      continue;
    }
    made_[key] = model::median_of_profiles(taken_[key]);
  }
  for (const auto& [key, make] : loop_step_makers_)
    if (const double step = make(); step > 0) // timed once already: keep those
      loop_steps_taken_[key].push_back(step);
  for (const auto& [key, make] : round_makers_) {
    try {
      rounds_taken_[key].push_back(make());
    } catch (const std::exception&) { // timed once already: keep those
      continue;
    }
  }
  rounds_ += 1;
}

cost::workload workload_of(const model::model_profile& p, const topology& t) {
  cost::workload w;
  for (const auto& l : p.layers)
    w.layers.push_back({l.name, l.forward_seconds, l.backward_seconds, l.update_seconds,
                        static_cast<double>(l.activation_bytes),
                        static_cast<double>(l.parameter_bytes)});
  w.profiled_batch = std::max<int64_t>(1, p.microbatch_size);
  w.batch_size = t.plan.batch_size;
  w.samples_per_epoch = split_size(t, model::split::train);
  w.test_samples = split_size(t, model::split::test);
  return w;
}

caf::expected<costed_strategy> cost_strategy_of(const std::string& name, const topology& t,
                                                profile_cache& profiles, int32_t side_by_side) {
  // The jobs with a cost model are those with rows in the catalogue (the
  // registry's variants), not a list of their own.
  const auto* mode = actors::find_mode(t.job);
  if (mode == nullptr || mode->variants.empty()) {
    std::string modelled;
    for (const auto& m : actors::all_modes())
      if (!m.variants.empty())
        modelled += (modelled.empty() ? "" : ", ") + m.name();
    return refuse(name, "job: " + t.job + " has no cost model (" + modelled + " have one)");
  }
  const bool pipeline = t.job == "pipeline";
  const int64_t batch = pipeline ? std::max<int64_t>(1, t.plan.batch_size / t.plan.microbatches)
                                 : t.plan.batch_size;
  // Every worker and stage computes on one thread (runtime.compute_threads
  // on W emulated hosts sharing this machine's cores). `local` is one
  // process on every core (compare runs it so): data-parallel's computes
  // min(W, cores) workers at once, each on its share of the cores (its
  // local loop's lanes); the others' one loop uses them all.
  const int32_t cores = actors::cores();
  int32_t lanes = 1;
  if (name == "local" && t.job == "data-parallel")
    lanes = std::max(1, std::min(actors::data_parallel::section_of(t).workers, cores));
  auto profile = name == "local" ? profiles.of(t, batch, std::max(1, cores / lanes), lanes)
                                 : profiles.of(t, batch, 1, side_by_side);
  if (!profile)
    return profile.error();
  costed_strategy c;
  c.name = name;
  c.model = profile->model;
  c.optimizer = trained_model_of(t).optimizer.name;
  c.load = workload_of(*profile, t);
  caf::expected<cost::strategy> s = pipeline          ? pipeline_of(name, t, c.hosts)
                                    : t.job == "ist" ? ist_of(name, t, c.hosts)
                                                      : data_parallel_of(name, t, c.load, c.hosts);
  if (!s)
    return s.error();
  if ((t.job == "data-parallel" || pipeline) && name != "local" && !profiles.from_file()) {
    // A worker computes its whole model in one graph a step, a stage its
    // layers: the layers timed one by one inside a pass summed 7-9% above
    // the step timed whole for the convnet at 32 samples (30.5-31.0 ms
    // against 28.4), 2.4% for the mlp. Their sum is taken from the step
    // timed whole; their split (what a frozen prefix saves, when a bucket
    // is ready, a stage's share) from the profile.
    auto step = profiles.whole_step_of(t, batch, side_by_side);
    if (!step)
      return step.error();
    scale_to_step(c.load, *step);
    c.timed_step_seconds = *step;
  }
  if (auto* ist = std::get_if<cost::ist_strategy>(&*s)) {
    // A subnet's step and a round's own work, timed as the roles run them:
    // a subnet's smaller matrices do not shrink as f does, and a round
    // assembles, cuts and writes back pieces no layer's profile has.
    const int32_t shards = ist->shards == 0 ? c.hosts : ist->shards;
    auto round = profiles.round_of(t, batch, c.hosts, shards, side_by_side);
    if (!round)
      return round.error();
    ist->subnet_step_seconds = round->step;
    ist->subnet_workers = c.hosts;
    ist->round = round->round;
    ist->timed_shards = shards;
  }
  if (name == "local") {
    // `--mode local`: one process trains every worker's batch each step on
    // its lanes, then takes their mean and steps: the loop is timed whole,
    // its end read cold after the backward as no layer's profile has it
    // (compare-mlp's 2 workers on 2 lanes: the mean and step 0.13 ms timed
    // apart, 0.5 ms in the loop; the loop 4.6-5.5 ms a step where the
    // layers and that end summed to 4.0).
    const auto* workers = std::get_if<cost::ring_strategy>(&*s);
    cost::local_strategy local{workers ? workers->freeze : cost::freezing{}, c.hosts, lanes};
    if (t.job == "data-parallel") {
      auto step = profiles.local_step_of(t, cores);
      if (!step)
        return step.error();
      local.loop_step_seconds = *step;
    }
    s = cost::strategy{local};
    c.hosts = 1;
  }
  c.strategy = *s;
  c.projected = projected_of(*s, c.hosts);
  return c;
}

} // namespace baton::apps
