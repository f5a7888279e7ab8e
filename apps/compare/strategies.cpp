#include "apps/compare/strategies.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "actors/modes/registry.hpp"
#include "actors/runtime/jobs.hpp"
#include "apps/args.hpp"
#include "messages/errc.hpp"

namespace baton::apps {

namespace fs = std::filesystem;


namespace {

/// Local SGD's L when the workload's data_parallel section names none.
constexpr int32_t default_sync_every = 8;
/// gpipe's microbatches per minibatch when the workload has 1 (one
/// microbatch would leave every stage but one idle at every moment).
constexpr int32_t gpipe_microbatches = 4;

strategy_choice data_parallel(std::string name, std::string summary, int32_t hosts,
                              std::vector<std::string> own) {
  strategy_choice s{std::move(name), std::move(summary), "data-parallel", "data_parallel"};
  s.overrides = {"data_parallel.workers=" + std::to_string(hosts)};
  s.overrides.insert(s.overrides.end(), own.begin(), own.end());
  s.batch_split = hosts;
  return s;
}

strategy_choice pipeline(std::string schedule, std::string summary, int32_t microbatches) {
  strategy_choice s{"pipeline:" + schedule, std::move(summary), "pipeline", "pipeline"};
  s.overrides = {"pipeline.schedule=" + schedule};
  s.microbatches_per_step = microbatches;
  return s;
}

} // namespace

std::vector<strategy_choice> all_strategies(int32_t hosts) {
  auto w = std::to_string(hosts);
  auto local = data_parallel("local", "one process, every core: the global batch per step (the "
                             "ring's steps, bit for bit)", hosts, {"data_parallel.exchange=ring"});
  local.flags = {"--mode", "local"};
  local.distributed = false;
  auto ist = strategy_choice{"ist", "independent subnets: each of W workers trains a disjoint "
                             "part of every hidden layer for L local steps", "ist", "ist"};
  ist.overrides = {"ist.workers=" + w};
  ist.batch_split = hosts;
  return {
    local,
    data_parallel("data-parallel:ring", "W workers, gradients all-reduced over a ring every "
                  "step", hosts, {"data_parallel.exchange=ring"}),
    data_parallel("data-parallel:ps", "W workers, gradients pushed to W parameter shards, "
                  "weights pulled, every step", hosts,
                  {"data_parallel.exchange=ps", "data_parallel.shards=" + w}),
    data_parallel("data-parallel:local-sgd", "W workers, own steps, weights averaged every L "
                  "steps", hosts, {"data_parallel.exchange=ring"}),
    pipeline("1f1b", "the model split into the planner's stages, one forward one backward, "
             "weight stashing", 1),
    pipeline("gpipe", "the planner's stages, all forwards then all backwards of "
             "microbatches, a flush per minibatch", gpipe_microbatches),
    ist,
    data_parallel("fine-tune:adaptive", "the ring with AutoFreeze: converged blocks freeze, "
                  "their gradients leave the ring", hosts, {"data_parallel.exchange=ring"}),
  };
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

/// Keys of transfer's that other jobs refuse (docs/configuration.md).
const char* transfer_backbone_keys[] = {"split", "stages", "place", "cache", "cache_mb",
                                        "feature_block"};

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

/// The strategy's own section: the keys that choose another strategy of
/// its job (exchange, sync_every, freeze, ...) or place its actors go (its
/// overrides set what it needs), the workload's optimizer
/// (backbone.pretrain.optimizer) is its optimizer when it names none.
void tidy_section(const strategy_choice& s, YAML::Node& doc) {
  if (s.section.empty())
    return;
  YAML::Node section = doc[s.section];
  if (!section || !section.IsMap())
    section = doc[s.section] = YAML::Node(YAML::NodeType::Map);
  for (const char* key : {"workers", "nodes", "shard_nodes", "exchange", "shards",
                          "max_staleness", "schedule"})
    section.remove(key);
  if (s.name == "data-parallel:local-sgd") {
    if (!section["sync_every"] || section["sync_every"].as<int>() < 1)
      section["sync_every"] = default_sync_every;
  } else {
    section.remove("sync_every");
  }
  bool freezes = s.name.rfind("fine-tune:", 0) == 0;
  if (!freezes)
    section.remove("freeze");
  else if (!section["freeze"] || !section["freeze"]["policy"] ||
           section["freeze"]["policy"].as<std::string>() != "adaptive")
    section["freeze"] = YAML::Load("{policy: adaptive}");
  auto pretrain = doc["backbone"] ? doc["backbone"]["pretrain"] : YAML::Node{};
  // The workload's `optimizer:` is every strategy's; without it, the
  // pre-training's stands in for the strategies' older keys.
  if (s.job != "pipeline" && !doc["optimizer"] && !section["optimizer"] && pretrain &&
      pretrain.IsMap() && pretrain["optimizer"])
    section["optimizer"] = YAML::Clone(pretrain["optimizer"]);
  if (section.size() == 0)
    doc.remove(s.section);
}

std::string read_text(const std::string& file, bool& ok) {
  std::ifstream in{file};
  ok = static_cast<bool>(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

caf::expected<std::string> derive_topology(const strategy_choice& s, const std::string& file) {
  bool ok = false;
  auto text = read_text(file, ok);
  if (!ok)
    return make_error(errc::bad_config, "cannot read the workload '" + file + "'");
  try {
    YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap())
      return make_error(errc::bad_config, file + ": expected a map of sections");
    doc["job"] = s.job;
    for (const char* section : {"pipeline", "data_parallel", "ist"})
      if (section != s.section)
        doc.remove(section);
    if (s.job != "transfer") {
      doc.remove("heads");
      if (doc["backbone"] && doc["backbone"].IsMap())
        for (const char* key : transfer_backbone_keys)
          doc["backbone"].remove(key);
    }
    tidy_section(s, doc);
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

} // namespace

caf::expected<std::vector<std::string>> run_overrides(strategy_choice& s,
                                                      const std::string& derived,
                                                      const std::string& file,
                                                      const std::vector<std::string>& user) {
  std::vector<std::string> out = s.overrides;
  out.insert(out.end(), user.begin(), user.end());
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
                                               : gpipe_microbatches;
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
  // IST's network is data-parallel's ist_mlp (bench ist compares them).
  return t->job == "ist" && t->backbone.name == "mlp" ? std::string{"ist_mlp"}
                                                      : t->backbone.name;
}

} // namespace baton::apps
