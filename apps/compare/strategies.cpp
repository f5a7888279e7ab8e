#include "apps/compare/strategies.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "actors/modes/planning.hpp"
#include "actors/modes/registry.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/local_run.hpp"
#include "apps/args.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace fs = std::filesystem;


namespace {

/// `text` with "{W}" replaced by the cluster's hosts.
std::string with_hosts(std::string text, int32_t hosts) {
  const std::string w = "{W}";
  for (auto at = text.find(w); at != std::string::npos; at = text.find(w, at))
    text.replace(at, w.size(), std::to_string(hosts));
  return text;
}

} // namespace

std::vector<strategy_choice> all_strategies(int32_t hosts) {
  std::vector<strategy_choice> out;
  for (const auto& mode : actors::all_modes())
    for (const auto& v : mode.variants) {
      strategy_choice s{v.name, v.summary, mode.name(), mode.schema.section};
      for (const auto& o : v.overrides)
        s.overrides.push_back(with_hosts(o, hosts));
      // Every core of the machine the W emulated hosts share (a local
      // run's default is the actors' budget, one thread each here, so that
      // its sums are theirs bit for bit; OpenBLAS adds in another order on
      // more threads).
      if (v.local)
        s.flags = {"--mode", "local", "--threads", std::to_string(actors::cores())};
      s.distributed = !v.local;
      s.batch_split = v.splits_batch ? hosts : 1;
      s.microbatches_per_step = v.microbatches;
      s.keeps = v.keeps;
      s.defaults = v.defaults;
      out.push_back(std::move(s));
    }
  return out;
}

caf::expected<std::vector<strategy_choice>> choose_strategies(const std::string& list,
                                                              int32_t hosts) {
  auto known = all_strategies(hosts);
  std::vector<std::string> names;
  for (const auto& s : known)
    names.push_back(s.name);
  std::vector<strategy_choice> chosen;
  std::stringstream in{list};
  std::string name;
  while (std::getline(in, name, ',')) {
    auto it = std::find_if(known.begin(), known.end(), [&](auto& s) { return s.name == name; });
    if (it == known.end()) {
      std::string all;
      for (const auto& n : names)
        all += (all.empty() ? "" : ", ") + n;
      return make_error(errc::bad_config, "unknown strategy '" + name + "'" +
                                            hint_among(name, names) + "; known: " + all);
    }
    chosen.push_back(*it);
  }
  if (chosen.empty())
    return make_error(errc::bad_config, "--strategies names no strategy");
  return chosen;
}

namespace {

/// Whether `job`'s schema lists `key` at `path` (dotted: a section, ""
/// the top level), the keys the parser reads under that job.
bool job_reads(const std::string& job, const std::string& path, const std::string& key) {
  const auto* mode = actors::find_mode(job);
  if (mode == nullptr)
    return false;
  auto keys = mode->schema.keys.find(path);
  return keys != mode->schema.keys.end() &&
         std::find(keys->second.begin(), keys->second.end(), key) != keys->second.end();
}

/// Whether `path` (dotted) is in a job's own section ("pipeline.stages.*").
bool in_own_section(const std::string& path) {
  for (const auto& mode : actors::all_modes()) {
    const auto& own = mode.schema.section;
    if (!own.empty() && (path == own || path.rfind(own + ".", 0) == 0))
      return true;
  }
  return false;
}

/// The keys other jobs add to the common sections (their schemas' keys:
/// transfer's backbone.split, runtime.head_threads, data-parallel's
/// optimizer.lr_scaling) that `job` does not read, removed from `doc`: the
/// parser refuses them by name under another job. The list is the
/// registry's, not one of compare's own.
void remove_other_jobs_keys(YAML::Node& doc, const std::string& job) {
  for (const auto& mode : actors::all_modes()) {
    if (mode.name() == job)
      continue;
    for (const auto& [path, keys] : mode.schema.keys) {
      // The top level (`heads`) is derive_topology's to tidy; a list
      // entry's keys go with its list.
      if (path.empty() || path.find('*') != std::string::npos || in_own_section(path))
        continue;
      YAML::Node section = doc;
      std::stringstream parts{path};
      for (std::string part; section && std::getline(parts, part, '.');)
        section.reset(section.IsMap() ? section[part] : YAML::Node{});
      if (!section || !section.IsMap())
        continue;
      for (const auto& key : keys)
        if (!job_reads(job, path, key))
          section.remove(key);
    }
  }
}

/// Makes the relative path at doc[section][key] absolute against `base`:
/// the derived text is written in another directory than the workload's.
void absolute_path(YAML::Node node, const char* key, const fs::path& base) {
  if (!node || !node.IsMap() || !node[key] || !node[key].IsScalar())
    return;
  auto text = node[key].Scalar();
  if (text.empty() || text == "none" || fs::path(text).is_absolute())
    return;
  node[key] = (base / text).lexically_normal().string();
}

void absolute_paths(YAML::Node& doc, const fs::path& base) {
  absolute_path(doc["data"], "dir", base);
  absolute_path(doc["backbone"], "checkpoint", base);
  absolute_path(doc["backbone"], "path", base);
  auto data = doc["data"];
  if (data && data.IsMap() && data["kind"] && data["kind"].as<std::string>() == "npy")
    for (const char* split : {"train", "test"})
      for (const char* key : {"x", "y"})
        absolute_path(data[split], key, base);
}

/// Keys of a strategy's section that choose another strategy of its job
/// or place its actors: dropped, unless its variant keeps them (its
/// overrides and defaults set what it needs).
const char* choosing_keys[] = {"workers", "nodes", "shard_nodes", "exchange", "shards",
                               "max_staleness", "schedule", "sync_every", "freeze"};

/// Whether one of the user's `--set`s gives the workload's `optimizer:`
/// (`optimizer={...}` or `optimizer.KEY=...`), as the file may.
bool sets_workload_optimizer(const std::vector<std::string>& user) {
  return std::any_of(user.begin(), user.end(), [](const std::string& o) {
    return o.rfind("optimizer=", 0) == 0 || o.rfind("optimizer.", 0) == 0;
  });
}

/// The strategy's own section: the keys that choose another strategy of
/// its job go (choosing_keys), its variant's defaults fill what the
/// workload leaves out, and the workload's optimizer
/// (backbone.pretrain.optimizer) is its optimizer when it names none and
/// neither the file nor the user's `--set` (`user`) gives `optimizer:`.
void tidy_section(const strategy_choice& s, YAML::Node& doc,
                  const std::vector<std::string>& user) {
  if (s.section.empty())
    return;
  YAML::Node section = doc[s.section];
  if (!section || !section.IsMap())
    section = doc[s.section] = YAML::Node(YAML::NodeType::Map);
  for (const char* key : choosing_keys)
    if (std::find(s.keeps.begin(), s.keeps.end(), key) == s.keeps.end())
      section.remove(key);
  if (!s.defaults.empty())
    for (const auto& entry : YAML::Load(s.defaults))
      if (!section[entry.first.Scalar()])
        section[entry.first.Scalar()] = YAML::Clone(entry.second);
  auto pretrain = doc["backbone"] ? doc["backbone"]["pretrain"] : YAML::Node{};
  // The workload's `optimizer:` is every strategy's; without it, the
  // pre-training's stands in for the older key of a section that has one
  // (its schema says so: a pipeline's section has none).
  if (job_reads(s.job, s.section, "optimizer") && !doc["optimizer"] &&
      !sets_workload_optimizer(user) && !section["optimizer"] && pretrain && pretrain.IsMap() &&
      pretrain["optimizer"])
    section["optimizer"] = YAML::Clone(pretrain["optimizer"]);
  if (section.size() == 0)
    doc.remove(s.section);
}

} // namespace

caf::expected<std::string> derive_topology(const strategy_choice& s, const std::string& text,
                                           const std::string& file,
                                           const std::vector<std::string>& user) {
  try {
    YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap())
      return make_error(errc::bad_config, file + ": expected a map of sections");
    doc["job"] = s.job;
    for (const auto& mode : actors::all_modes())
      if (const auto& section = mode.schema.section; !section.empty() && section != s.section)
        doc.remove(section);
    // Every strategy of the catalogue (the modes' variants) trains one
    // task: a transfer workload's `heads` are its tasks, which a one-task
    // job would read as its own head (their older form).
    doc.remove("heads");
    remove_other_jobs_keys(doc, s.job);
    tidy_section(s, doc, user);
    absolute_paths(doc, fs::absolute(file).parent_path());
    return "# " + s.name + ": " + file + " as `baton compare` ran it\n" + YAML::Dump(doc) + "\n";
  } catch (const YAML::Exception& e) {
    return make_error(errc::bad_config, file + ": " + e.what());
  }
}

namespace {

/// The value of the last `key=VALUE` of `overrides`, else `text`'s
/// data.KEY, else `fallback`.
int64_t data_value(const std::string& key, const std::string& text,
                   const std::vector<std::string>& overrides, int64_t fallback) {
  auto prefix = "data." + key + "=";
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (it->rfind(prefix, 0) == 0)
      return std::stoll(it->substr(prefix.size()));
  auto doc = YAML::Load(text);
  if (doc["data"] && doc["data"][key])
    return doc["data"][key].as<int64_t>();
  return fallback;
}

/// Whether `o` (KEY=VALUE) sets a key of another strategy's section, one
/// derive_topology dropped from the file `s` runs: a setting of the
/// strategies that read that section, not of `s`.
bool sets_another_section(const strategy_choice& s, const std::string& o) {
  const auto section = o.substr(0, o.find_first_of(".="));
  for (const auto& mode : actors::all_modes())
    if (mode.schema.section == section)
      return section != s.section;
  return false;
}

} // namespace

caf::expected<std::vector<std::string>> run_overrides(strategy_choice& s,
                                                      const std::string& derived,
                                                      const std::string& file,
                                                      const std::vector<std::string>& user) {
  std::vector<std::string> out = s.overrides;
  for (const auto& o : user)
    if (!sets_another_section(s, o))
      out.push_back(o);
  int64_t batch = 0, microbatches = 1;
  try {
    batch = data_value("batch_size", derived, user, 64);
    microbatches = data_value("microbatches", derived, user, 1);
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, file + ": data.batch_size and data.microbatches must "
                                               "be whole numbers (" + e.what() + ")");
  }
  if (batch < 1 || batch % s.batch_split != 0)
    return make_error(errc::bad_config,
                      file + ": data.batch_size " + std::to_string(batch) + " (the global batch) "
                        "is not a multiple of the " + std::to_string(s.batch_split) + " workers "
                        "of " + s.name + ", who take an equal share each");
  out.push_back("data.batch_size=" + std::to_string(batch / s.batch_split));
  if (s.microbatches_per_step > 1) {
    s.microbatches_per_step = microbatches > 1 ? static_cast<int32_t>(microbatches)
                                               : s.microbatches_per_step;
    out.push_back("data.microbatches=" + std::to_string(s.microbatches_per_step));
  }
  return out;
}

caf::expected<std::string> applies(const strategy_choice& s, const std::string& path,
                                   const std::vector<std::string>& overrides, int32_t hosts) {
  actors::run_request r;
  r.topology_path = path;
  r.overrides = overrides;
  auto t = actors::load_request_topology(r);
  if (!t)
    return t.error();
  actors::derive_thread_budgets(*t);
  auto placed = s.distributed ? actors::with_local_nodes(*t, hosts) : *t;
  // The plan of a pipeline without stages profiles and plans them, saying
  // so at length: the run itself logs it again.
  auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  auto plan = actors::plan_of(placed);
  spdlog::set_level(level);
  if (!plan)
    return plan.error();
  // The model the job trains (IST's network is data-parallel's ist_mlp:
  // bench ist compares them).
  return actors::trained_model_of(*t).spec.name;
}

} // namespace baton::apps
