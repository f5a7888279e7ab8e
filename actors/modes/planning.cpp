#include "actors/modes/planning.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "actors/config/topology.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/config/yaml_field.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/bounded_file.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr int32_t profile_warmups = 2;

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

std::string mebibytes(double bytes) {
  return format("%.2f", bytes / 1048576.0);
}

std::string profile_table(const model::model_profile& p) {
  std::string out = format("%-10s %11s %12s %10s %14s %14s\n", "layer", "forward ms",
                           "backward ms", "update ms", "activation MiB", "parameter MiB");
  double forward = 0, backward = 0, update = 0, activations = 0, parameters = 0;
  for (const auto& l : p.layers) {
    out += format("%-10s %11.3f %12.3f %10.3f %14s %14s\n", l.name.c_str(),
                  1e3 * l.forward_seconds, 1e3 * l.backward_seconds, 1e3 * l.update_seconds,
                  mebibytes(static_cast<double>(l.activation_bytes)).c_str(),
                  mebibytes(static_cast<double>(l.parameter_bytes)).c_str());
    forward += l.forward_seconds;
    backward += l.backward_seconds;
    update += l.update_seconds;
    activations += static_cast<double>(l.activation_bytes);
    parameters += static_cast<double>(l.parameter_bytes);
  }
  out += format("%-10s %11.3f %12.3f %10.3f %14s %14s\n", "total", 1e3 * forward,
                1e3 * backward, 1e3 * update, mebibytes(activations).c_str(),
                mebibytes(parameters).c_str());
  return out;
}

// -- reading the profile JSON ---------------------------------------------------------

/// A JSON member of the expected kind, or an error naming the file and key.
struct json_reader {
  const std::string& name;

  caf::error fail(const std::string& key, const std::string& expected) const {
    return make_error(errc::bad_file, name + ": '" + key + "': expected " + expected);
  }

  /// Seconds of one layer on one microbatch: 1e308 summed to inf and was planned.
  bool number(const json& j, const std::string& key, double& out, caf::error& err) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
        it->get<double>() < 0 || it->get<double>() > 1e6) {
      err = fail(key, "a number of seconds from 0 to 1e6");
      return false;
    }
    out = it->get<double>();
    return true;
  }

  /// An integer of `out`'s range, at least `least` (a profile's counts: 1).
  template <class Integer>
  bool integer(const json& j, const std::string& key, Integer& out, caf::error& err,
               int64_t least = 0) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < least ||
        it->get<int64_t>() > static_cast<int64_t>(std::numeric_limits<Integer>::max())) {
      err = fail(key, least == 0 ? "a non-negative integer" : "a positive integer");
      return false;
    }
    out = static_cast<Integer>(it->get<int64_t>());
    return true;
  }

  bool string(const json& j, const std::string& key, std::string& out, caf::error& err) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      err = fail(key, "a string");
      return false;
    }
    out = it->get<std::string>();
    return true;
  }
};

bool read_layer(const json_reader& read, const json& j, size_t index, model::layer_cost& l,
                caf::error& err) {
  if (!j.is_object()) {
    err = read.fail("layers[" + std::to_string(index) + "]", "an object");
    return false;
  }
  return read.string(j, "name", l.name, err) &&
         read.number(j, "forward_seconds", l.forward_seconds, err) &&
         read.number(j, "backward_seconds", l.backward_seconds, err) &&
         read.integer(j, "activation_bytes", l.activation_bytes, err) &&
         read.integer(j, "parameter_bytes", l.parameter_bytes, err) &&
         // Profiles written before update times were measured have none.
         (!j.contains("update_seconds") || read.number(j, "update_seconds", l.update_seconds, err)) &&
         // Profiles written before weight_gradient: next have none (no layer's moves).
         (!j.contains("weight_gradient_seconds") ||
          read.number(j, "weight_gradient_seconds", l.weight_gradient_seconds, err));
}

// -- printing the plan ------------------------------------------------------------------

std::string bytes_or_unlimited(double bytes) {
  if (std::isinf(bytes))
    return "unlimited";
  return format("%.0f bytes (%.1f MiB)", bytes, bytes / 1048576.0);
}

} // namespace

// -- profile --------------------------------------------------------------------------

json to_json(const profile_file& p) {
  json layers = json::array();
  for (const auto& l : p.profile.layers)
    layers.push_back({{"name", l.name},
                      {"forward_seconds", l.forward_seconds},
                      {"backward_seconds", l.backward_seconds},
                      {"activation_bytes", l.activation_bytes},
                      {"parameter_bytes", l.parameter_bytes},
                      {"update_seconds", l.update_seconds},
                      {"weight_gradient_seconds", l.weight_gradient_seconds}});
  json j{{"model", p.profile.model},
         {"topology", p.topology},
         {"microbatch_size", p.profile.microbatch_size},
         {"microbatches_per_minibatch", p.microbatches_per_minibatch},
         {"timed_microbatches", p.profile.microbatches},
         {"warmups", p.warmups},
         {"threads", p.profile.threads},
         {"machine", {{"hostname", p.profile.hostname}, {"cores", p.profile.cores}}},
         {"layers", layers}};
  if (!p.profile.sample_shape.empty())
    j["sample_shape"] = p.profile.sample_shape;
  return j;
}

caf::expected<profile_file> profile_from_json(const json& j, const std::string& name) {
  json_reader read{name};
  if (!j.is_object())
    return make_error(errc::bad_file, name + ": not a profile JSON object (expected the output "
                                             "of `baton profile`)");
  profile_file p;
  caf::error err;
  if (!read.string(j, "model", p.profile.model, err) ||
      !read.string(j, "topology", p.topology, err) ||
      !read.integer(j, "microbatch_size", p.profile.microbatch_size, err, 1) ||
      !read.integer(j, "microbatches_per_minibatch", p.microbatches_per_minibatch, err, 1) ||
      !read.integer(j, "timed_microbatches", p.profile.microbatches, err, 1) ||
      !read.integer(j, "threads", p.profile.threads, err, 1))
    return err;
  read.integer(j, "warmups", p.warmups, err); // informative only
  // Files written before it was recorded have none: not checked then.
  if (auto shape = j.find("sample_shape"); shape != j.end()) {
    if (!shape->is_array() || shape->size() != 3 ||
        !std::all_of(shape->begin(), shape->end(),
                     [](const json& x) { return x.is_number_integer() && x.get<int64_t>() > 0; }))
      return read.fail("sample_shape", "three positive integers (C, H, W)");
    p.profile.sample_shape = shape->get<std::vector<int64_t>>();
  }
  if (auto machine = j.find("machine"); machine != j.end() && machine->is_object()) {
    p.profile.hostname = machine->value("hostname", "");
    p.profile.cores = machine->value("cores", 0);
  }
  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array() || layers->empty())
    return read.fail("layers", "a non-empty list of layers");
  std::set<std::string> names;
  for (size_t k = 0; k < layers->size(); ++k) {
    model::layer_cost l;
    if (!read_layer(read, (*layers)[k], k, l, err))
      return err;
    if (l.name.empty() || !names.insert(l.name).second)
      return read.fail("layers[" + std::to_string(k) + "].name", "a unique, non-empty name");
    p.profile.layers.push_back(l);
  }
  return p;
}

caf::expected<profile_file> load_profile(const std::string& path) {
  // A regular file of at most 4 MiB (~10,000 layers; a resnet18 profile is
  // a few KB), as every config file: `--profile /dev/zero` read without end.
  constexpr size_t max_profile_bytes = size_t{4} << 20;
  std::string text;
  if (std::string why = model::read_bounded_file(path, text, max_profile_bytes, "a profile");
      !why.empty())
    return make_error(errc::bad_file, path + ": cannot read the profile: " + why
                                        + " (expected the JSON written by `baton profile --out`)");
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded())
    return make_error(errc::bad_file, path + ": not valid JSON");
  return profile_from_json(j, path);
}

// A data-parallel worker's model is every job's: the mlp or IST's network
// whole, else the backbone with its classifier.
model::layered_model build_trained_model(const trained_model& m) {
  return data_parallel::make_worker_model(m.spec);
}

caf::expected<profile_file> run_profile(const profile_request& r) {
  if (r.out.empty())
    return make_error(errc::bad_config, "baton profile: --out FILE is required");
  auto t = load_topology(r.topology_path);
  if (!t)
    return t.error();
  profile_file p;
  p.topology = fs::absolute(r.topology_path).lexically_normal().string();
  p.warmups = profile_warmups;
  p.microbatches_per_minibatch = t->plan.microbatches;
  model::profile_options options;
  options.microbatch_size = r.microbatch_size > 0 ? r.microbatch_size : microbatch_size_of(*t);
  options.sample_shape = sample_shape_of(*t);
  options.microbatches = r.microbatches;
  options.warmups = profile_warmups;
  options.threads = 1;
  options.seed = t->seed;
  const auto trained = trained_model_of(*t);
  options.optimizer = trained.optimizer;
  try {
    p.profile = model::profile_model(build_trained_model(trained), options);
  } catch (const std::exception& e) { // model::error, c10::Error
    return make_error(errc::bad_config, r.topology_path + ": cannot profile the model: " +
                                          e.what());
  }
  p.profile.model = trained.spec.name;
  std::printf("profile of %s (%zu layers), microbatch of %lld samples, %d timed microbatches "
              "after %d warm-ups, 1 torch thread, on %s (%d cores)\n",
              p.profile.model.c_str(), p.profile.layers.size(),
              static_cast<long long>(p.profile.microbatch_size), p.profile.microbatches,
              p.warmups, p.profile.hostname.c_str(), p.profile.cores);
  std::printf("%s", profile_table(p.profile).c_str());
  if (auto why = model::try_replace_file(r.out, to_json(p).dump(2) + "\n"); !why.empty())
    return make_error(errc::bad_file, "--out: " + why);
  std::printf("profile written to %s\n", r.out.c_str());
  return p;
}

// -- plan ---------------------------------------------------------------------------------

std::string describe_plan(const model::partition_plan& plan, const profile_file& p,
                          const model::partition_options& options) {
  const auto& layers = p.profile.layers;
  double one_machine = 0;
  for (const auto& l : layers)
    one_machine += model::training_seconds(l);
  std::string out = format("plan for %s (%zu layers, microbatch of %lld samples) on at most %d "
                           "machines, %.3g bytes/s, memory %s%s\n",
                           p.profile.model.c_str(), layers.size(),
                           static_cast<long long>(p.profile.microbatch_size), options.machines,
                           options.bandwidth, bytes_or_unlimited(options.memory).c_str(),
                           options.straight ? ", straight (no replication)" : "");
  // What handing on the cuts' weight gradients would give (not planned by default).
  auto handed = plan;
  model::hand_on_weight_gradients(layers, handed, options.bandwidth, options.forward_only);
  out += format("configuration %s: %zu stage(s) on %d machine(s)\n", plan.notation().c_str(),
                plan.stages.size(), plan.machines_used());
  out += format("%-5s %-20s %8s %11s %9s %9s %10s %9s\n", "stage", "layers", "replicas",
                "compute ms", "sync ms", "send ms", "memory MiB", "in flight");
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const auto& s = plan.stages[k];
    out += format("%-5zu %-20s %8d %11.3f %9.3f %9.3f %10s %9d\n", k,
                  layer_range(s, layers).c_str(), s.replicas, 1e3 * s.compute_seconds,
                  1e3 * s.weight_sync_seconds, 1e3 * s.output_seconds,
                  mebibytes(s.memory_bytes).c_str(), s.in_flight);
    if (k < handed.stages.size() && handed.stages[k].weight_gradient_next && !s.weight_gradient_next)
      out += format("      (weight_gradient: next would move %.3f ms of %s's backward to stage "
                    "%zu: slowest stage %.3f ms instead of %.3f)\n",
                    1e3 * layers[s.end - 1].weight_gradient_seconds,
                    layers[s.end - 1].name.c_str(), k + 1, 1e3 * handed.slowest_seconds,
                    1e3 * plan.slowest_seconds);
    if (s.weight_gradient_next)
      out += format("      stage %zu computes the weight gradient of %s (%.3f ms of its backward: "
                    "weight_gradient: next)\n",
                    k + 1, layers[s.end - 1].name.c_str(),
                    1e3 * layers[s.end - 1].weight_gradient_seconds);
  }
  out += format("predicted time per microbatch of the slowest stage: %.3f ms (one machine: "
                "%.3f ms, %.2fx); per minibatch of %d microbatches: %.3f ms\n",
                1e3 * plan.slowest_seconds, 1e3 * one_machine,
                plan.slowest_seconds > 0 ? one_machine / plan.slowest_seconds : 0.0,
                p.microbatches_per_minibatch,
                1e3 * plan.slowest_seconds * p.microbatches_per_minibatch);
  return out;
}

namespace {

/// Removes from `root` what the jobs but `job` add to a topology: their
/// sections, and their keys at the top level and in `backbone` that `job`
/// does not read too.
void remove_other_jobs(YAML::Node& root, const std::string& job) {
  const auto& jobs = all_job_schemas();
  const auto& own = *std::find_if(jobs.begin(), jobs.end(),
                                  [&](const job_schema& s) { return s.name == job; });
  for (const auto& other : jobs) {
    if (other.name == job)
      continue;
    if (!other.section.empty())
      root.remove(other.section);
    for (const auto& [path, keys] : other.keys) {
      if (path != "" && path != "backbone")
        continue;
      YAML::Node section = path.empty() ? root : root[path];
      auto mine = own.keys.find(path);
      for (const auto& key : keys)
        if (section.IsMap() && (mine == own.keys.end() || !detail::contains(mine->second, key)))
          section.remove(key);
    }
  }
}

} // namespace

caf::expected<std::string> planned_topology_yaml(const std::string& topology_path,
                                                 const model::partition_plan& plan,
                                                 const std::vector<model::layer_cost>& layers) {
  auto t = load_topology(topology_path);
  if (!t)
    return t.error();
  YAML::Node root;
  try {
    root = YAML::LoadFile(topology_path);
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_config, topology_path + ": " + e.what());
  }
  root["job"] = "pipeline";
  // The parsed topology holds these paths made absolute against the file's
  // directory; the planned file may live elsewhere.
  if (root["backbone"] && root["backbone"]["checkpoint"])
    root["backbone"]["checkpoint"] = t->checkpoint.empty() ? "none" : t->checkpoint;
  if (root["backbone"] && root["backbone"]["path"])
    root["backbone"]["path"] = t->backbone.path;
  // The keys and sections of the other jobs (transfer's `backbone.split`,
  // `stages` and `place`, its feature cache and heads): job: pipeline
  // refuses them, takes its stages from the section below and trains the
  // workload's task.
  remove_other_jobs(root, "pipeline");
  root.remove("heads");
  root["task"] = t->task;
  YAML::Node pipeline;
  pipeline["schedule"] = "1f1b";
  for (const auto& s : plan.stages) {
    YAML::Node stage;
    stage["last_layer"] = layers[s.end - 1].name;
    stage["replicas"] = s.replicas;
    if (s.weight_gradient_next)
      stage["weight_gradient"] = "next";
    stage.SetStyle(YAML::EmitterStyle::Flow);
    pipeline["stages"].push_back(stage);
  }
  root["pipeline"] = pipeline;
  YAML::Emitter emitter;
  emitter << root;
  return "# Planned by `baton plan` from " + t->file + ": configuration " + plan.notation() +
         ", predicted " + format("%.3f", 1e3 * plan.slowest_seconds) +
         " ms per microbatch (slowest stage).\n" + emitter.c_str() + "\n";
}

caf::expected<model::partition_plan> run_plan(const plan_request& r) {
  if (r.profile_path.empty())
    return make_error(errc::bad_config, "baton plan: --profile FILE is required");
  if (r.machines < 1)
    return make_error(errc::bad_config, "baton plan: --machines N (N >= 1) is required");
  auto p = load_profile(r.profile_path);
  if (!p)
    return p.error();
  model::partition_options options;
  options.machines = r.machines;
  options.bandwidth = r.bandwidth;
  options.memory = r.memory;
  options.straight = r.straight;
  options.hand_on_weight_gradients = r.hand_on_weight_gradients;
  model::partition_plan plan;
  try {
    plan = model::plan_partition(p->profile.layers, options);
  } catch (const model::error& e) {
    return make_error(errc::bad_config, std::string{"baton plan: "} + e.what());
  }
  std::printf("%s", describe_plan(plan, *p, options).c_str());
  if (r.out.empty())
    return plan;
  auto yaml = planned_topology_yaml(r.topology_path.empty() ? p->topology : r.topology_path,
                                    plan, p->profile.layers);
  if (!yaml)
    return yaml.error();
  if (auto why = model::try_replace_file(r.out, *yaml); !why.empty())
    return make_error(errc::bad_file, "--out: " + why);
  std::printf("topology written to %s\n", r.out.c_str());
  return plan;
}

} // namespace modes
} // namespace baton::actors
