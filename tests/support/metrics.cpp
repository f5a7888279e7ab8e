#include "tests/support/metrics.hpp"

#include <fstream>
#include <map>
#include <utility>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"

namespace baton::testing {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in{path};
  return nlohmann::json::parse(in, nullptr, false);
}

nlohmann::json run_job(const scratch_dir& dir, std::vector<std::string> args,
                       const std::string& name) {
  auto metrics = dir.path() + "/" + name + ".json";
  args.insert(args.end(), {"--metrics-out", metrics});
  auto out = run_baton(args);
  EXPECT_EQ(out.exit_code, 0) << out.text;
  return read_json(metrics);
}

const nlohmann::json& shared_run(const scratch_dir& dir, const std::vector<std::string>& args,
                                 const std::string& name) {
  static std::map<std::pair<std::string, std::vector<std::string>>, nlohmann::json> runs;
  auto [at, added] = runs.try_emplace({dir.path(), args});
  if (added)
    at->second = run_job(dir, args, name);
  return at->second;
}

std::map<std::string, std::string> digests_by_actor(const nlohmann::json& metrics,
                                                    const std::string& role) {
  std::map<std::string, std::string> out;
  for (const auto& a : metrics.at("actors"))
    if (a.contains("weights_digest") && (role.empty() || a.at("role") == role))
      out[a.at("name").get<std::string>()] = a.at("weights_digest").get<std::string>();
  return out;
}

void expect_steps_trained(const nlohmann::json& metrics, int32_t actors, int64_t steps) {
  ASSERT_TRUE(metrics.contains("trained")) << metrics.dump();
  int64_t trained = 0;
  for (const auto& [actor, count] : metrics.at("trained").items()) {
    EXPECT_EQ(count.at("trained").get<int64_t>(), steps) << actor;
    trained += count.at("trained").get<int64_t>();
  }
  EXPECT_EQ(trained, actors * steps);
}

saved_runs run_both_saving(const scratch_dir& dir, const std::vector<std::string>& args,
                           const std::string& name, const std::vector<std::string>& local_only) {
  saved_runs out;
  out.local_model = dir.path() + "/" + name + "-local.pt";
  out.actors_model = dir.path() + "/" + name + ".pt";
  auto local = with(args, {"--mode", "local", "--save-model", out.local_model});
  local.insert(local.end(), local_only.begin(), local_only.end());
  out.local = run_job(dir, local, name + "-local");
  out.actors = run_job(dir, with(args, {"--save-model", out.actors_model}), name);
  return out;
}

void expect_same_best_epoch(const nlohmann::json& actors, const nlohmann::json& local,
                            size_t epochs) {
  const auto& mine = actors.at("heads")[0];
  const auto& theirs = local.at("heads")[0];
  ASSERT_EQ(mine.at("epochs").size(), epochs) << mine.dump();
  ASSERT_EQ(theirs.at("epochs").size(), epochs) << theirs.dump();
  for (size_t e = 0; e < epochs; ++e)
    for (const char* key : {"validation_accuracy", "test_accuracy"})
      EXPECT_EQ(mine.at("epochs")[e].at(key), theirs.at("epochs")[e].at(key)) << key << " " << e;
  EXPECT_EQ(mine.at("best_epoch"), theirs.at("best_epoch"));
  EXPECT_EQ(actors.value("saved", ""), "best");
}

} // namespace baton::testing
