#include "apps/predict/profile_cache.hpp"

#include <algorithm>
#include <future>

#include "actors/modes/backbone_split.hpp"
#include "actors/modes/planning.hpp"
#include "apps/predict/link_calibration.hpp"
#include "messages/errc.hpp"
#include "model/core/dataset.hpp"
#include "model/core/layered_model.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::apps {

namespace {

using actors::topology;

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

/// Why the profile of a `baton profile` file does not time the model `m`
/// trains on samples of `shape` ("" when it does): another sample shape
/// (where the file records one), or layers of other names or sizes (a
/// TorchScript model is always "torchscript", whatever its file; an mlp of
/// other widths has the same layer names). Before, any profile of a model
/// of that name was taken, and its times predicted another workload.
std::string misfit(const model::model_profile& p, const trained_model& m,
                   const std::vector<int64_t>& shape) {
  const std::string again = " (profile it with `baton profile`)";
  if (!p.sample_shape.empty() && p.sample_shape != shape)
    return "it profiled " + p.model + " on samples of " + model::shape_text(p.sample_shape) +
           ", this workload's are " + model::shape_text(shape) + again;
  std::vector<std::pair<std::string, int64_t>> layers;
  try {
    const auto model = actors::build_trained_model(m);
    for (const auto& l : model.layers())
      layers.emplace_back(l.name, model::parameter_bytes(l));
  } catch (const std::exception&) {
    return ""; // the model cannot be built: profiling it says why
  }
  for (size_t k = 0; k < std::max(layers.size(), p.layers.size()); ++k) {
    auto there = k < p.layers.size()
                   ? p.layers[k].name + " (" + std::to_string(p.layers[k].parameter_bytes) +
                       " bytes of parameters)"
                   : std::string{"no layer"};
    auto here = k < layers.size() ? layers[k].first + " (" + std::to_string(layers[k].second) +
                                      " bytes of parameters)"
                                  : std::string{"no layer"};
    if (there != here)
      return "it profiled a " + p.model + " of other layers than this workload's: its layer " +
             std::to_string(k + 1) + " is " + there + ", this workload's " + here + again;
  }
  return "";
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
  if (given_ && given_->model == m.spec.name) {
    if (auto why = misfit(*given_, m, shape); !why.empty())
      return make_error(errc::bad_config, t.file + ": --profile: " + why);
    return made_[key] = *given_;
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

caf::expected<std::vector<double>> profile_cache::timed(
  const std::string& key, std::function<caf::expected<std::vector<double>>()> time) {
  auto& taken = timings_[key];
  if (taken.empty()) {
    auto figures = time();
    if (!figures)
      return figures.error();
    taken.push_back(*figures);
    timers_[key] = std::move(time);
  }
  std::vector<double> medians;
  for (size_t k = 0; k < taken.front().size(); ++k) {
    std::vector<double> figure;
    for (const auto& timing : taken)
      figure.push_back(timing.at(k));
    medians.push_back(median_of(std::move(figure)));
  }
  return medians;
}

caf::expected<double> profile_cache::whole_step_of(const topology& t, int64_t batch,
                                                   int32_t copies) {
  const trained_model m = trained_model_of(t);
  const auto shape = actors::sample_shape_of(t);
  const std::string key = "whole/" + key_of(m, shape, batch, 1) + "/c" + std::to_string(copies);
  auto step = timed(key, [m, shape, batch, copies,
                          file = t.file]() -> caf::expected<std::vector<double>> {
    model::data_parallel_settings spec;
    spec.batch_size = batch;
    spec.optimizer = m.optimizer;
    try {
      return std::vector<double>{model::time_whole_step(
        [&m] { return actors::build_trained_model(m); }, spec, shape, m.spec.classes, copies,
        model::timed_loop_seconds)};
    } catch (const std::exception& e) { // model::error, c10::Error
      return make_error(errc::bad_config, file + ": cannot time a step of the model " +
                                            m.spec.name + ": " + e.what());
    }
  });
  if (!step)
    return step.error();
  return step->front();
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
  for (const auto& [key, time] : timers_)
    if (auto figures = time(); figures && figures->size() == timings_[key].front().size())
      timings_[key].push_back(*figures); // timed once already: a failure keeps those
  rounds_ += 1;
}

} // namespace baton::apps
