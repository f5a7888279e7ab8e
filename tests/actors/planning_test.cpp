#include "actors/planning.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "actors/topology.hpp"
#include "messages/errc.hpp"
#include "tests/actors/baton_process.hpp"

namespace fs = std::filesystem;
using baton::actors::profile_file;
using baton::actors::profile_from_json;
using baton::testing::read_json;
using baton::testing::run_baton;
using baton::testing::source_path;
using baton::testing::temp_dir;

namespace {

profile_file small_profile() {
  profile_file p;
  p.topology = source_path("configs/transfer.yaml");
  p.warmups = 2;
  p.microbatches_per_minibatch = 2;
  p.profile.model = "convnet";
  p.profile.microbatch_size = 32;
  p.profile.microbatches = 10;
  p.profile.threads = 1;
  p.profile.hostname = "host";
  p.profile.cores = 2;
  p.profile.layers = {{"conv1", 0.001, 0.002, 4096, 1280}, {"relu1", 0.0001, 0.0002, 4096, 0}};
  return p;
}

class planning_test : public ::testing::Test {
protected:
  void SetUp() override { dir_ = temp_dir("planning"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

} // namespace

TEST_F(planning_test, profile_json_round_trips) {
  auto p = small_profile();
  auto back = profile_from_json(baton::actors::to_json(p), "p.json");
  ASSERT_TRUE(back) << baton::describe(back.error());
  EXPECT_EQ(back->topology, p.topology);
  EXPECT_EQ(back->microbatches_per_minibatch, 2);
  EXPECT_EQ(back->profile.microbatch_size, 32);
  EXPECT_EQ(back->profile.hostname, "host");
  ASSERT_EQ(back->profile.layers.size(), 2u);
  EXPECT_EQ(back->profile.layers[0].name, "conv1");
  EXPECT_EQ(back->profile.layers[0].backward_seconds, 0.002);
  EXPECT_EQ(back->profile.layers[1].activation_bytes, 4096);
  EXPECT_EQ(back->profile.layers[0].parameter_bytes, 1280);
}

TEST_F(planning_test, bad_profiles_name_the_key) {
  auto j = baton::actors::to_json(small_profile());
  j["layers"][1]["parameter_bytes"] = -5;
  auto bad = profile_from_json(j, "p.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), baton::errc::bad_file);
  EXPECT_NE(baton::describe(bad.error()).find("p.json: 'parameter_bytes'"), std::string::npos)
    << baton::describe(bad.error());
  j = baton::actors::to_json(small_profile());
  j["layers"][1]["name"] = "conv1";
  EXPECT_FALSE(profile_from_json(j, "p.json"));
  j.erase("layers");
  EXPECT_FALSE(profile_from_json(j, "p.json"));
  EXPECT_FALSE(baton::actors::load_profile(path("missing.json")));
}

TEST_F(planning_test, profile_then_plan_writes_a_topology_that_loads) {
  const auto profile = path("profile.json");
  auto out = run_baton({"profile", source_path("configs/transfer.yaml"), "--out", profile,
                        "--microbatches", "2", "--batch", "8"});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto j = read_json(profile);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["model"], "convnet");
  EXPECT_EQ(j["microbatch_size"], 8);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["layers"].size(), 17u); // convnet backbone (16) + classifier
  EXPECT_EQ(j["layers"][16]["name"], "fc2");

  const auto planned = path("planned.yaml");
  out = run_baton({"plan", "--profile", profile, "--machines", "3", "--out", planned});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("configuration "), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("predicted time per microbatch of the slowest stage"),
            std::string::npos)
    << out.text;
  auto t = baton::actors::load_topology(planned);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->job, "pipeline");
  EXPECT_EQ(t->schedule, "1f1b");
  ASSERT_FALSE(t->pipeline.empty());
  EXPECT_EQ(t->pipeline.front().begin, 0u);
  EXPECT_EQ(t->pipeline.back().end, 17u);
  int32_t machines = 0;
  for (size_t k = 0; k < t->pipeline.size(); ++k) {
    machines += t->pipeline[k].replicas;
    if (k > 0)
      EXPECT_EQ(t->pipeline[k].begin, t->pipeline[k - 1].end);
  }
  EXPECT_LE(machines, 3);
  // The checkpoint path still names the reference file's checkpoint.
  auto source = baton::actors::load_topology(source_path("configs/transfer.yaml"));
  ASSERT_TRUE(source);
  EXPECT_EQ(t->checkpoint, source->checkpoint);

  // The straight plan of the same profile has one machine per stage.
  out = run_baton({"plan", "--profile", profile, "--machines", "3", "--straight", "--out",
                   planned});
  ASSERT_EQ(out.exit_code, 0) << out.text;
  t = baton::actors::load_topology(planned);
  ASSERT_TRUE(t) << baton::describe(t.error());
  for (const auto& s : t->pipeline)
    EXPECT_EQ(s.replicas, 1);

  // A memory limit nothing fits in is an error, exit code 2.
  out = run_baton({"plan", "--profile", profile, "--machines", "3", "--memory", "1000"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("no partition"), std::string::npos) << out.text;
}

TEST_F(planning_test, bad_arguments_exit_with_2) {
  EXPECT_EQ(run_baton({"plan", "--machines", "2"}).exit_code, 2);
  EXPECT_EQ(run_baton({"plan", "--profile", path("missing.json"), "--machines", "2"}).exit_code,
            2);
  EXPECT_EQ(run_baton({"profile", source_path("configs/transfer.yaml")}).exit_code, 2);
  EXPECT_EQ(run_baton({"plan", "--profile", "x.json", "--machines", "2", "--bandwidth", "-1"})
              .exit_code,
            2);
}

// -- the `pipeline:` section of a topology ---------------------------------------------

namespace {

const std::string pipeline_base = R"(job: pipeline
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: a, task: all10}
)";

caf::expected<baton::actors::topology> parse_pipeline(const std::string& section,
                                                      const std::string& job = "") {
  std::string text = pipeline_base + section;
  if (!job.empty())
    text.replace(0, text.find('\n'), "job: " + job);
  return baton::actors::parse_topology(text, "p.yaml");
}

// The error of a topology that must not parse, as a user sees it.
std::string error_of(const caf::expected<baton::actors::topology>& t) {
  EXPECT_FALSE(t);
  return t ? std::string{} : baton::describe(t.error());
}

} // namespace

TEST_F(planning_test, pipeline_section_is_parsed) {
  auto t = parse_pipeline(R"(pipeline:
  schedule: 1f1b
  vertical_sync: true
  stages:
    - {last_layer: pool1, replicas: 2}
    - {last_layer: pool2}
    - {last_layer: fc2}
)");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->job, "pipeline");
  EXPECT_EQ(t->schedule, "1f1b");
  EXPECT_TRUE(t->vertical_sync);
  ASSERT_EQ(t->pipeline.size(), 3u);
  EXPECT_EQ(t->pipeline[0].begin, 0u);
  EXPECT_EQ(t->pipeline[0].end, 5u);
  EXPECT_EQ(t->pipeline[0].replicas, 2);
  EXPECT_EQ(t->pipeline[1].begin, 5u);
  EXPECT_EQ(t->pipeline[1].end, 10u);
  EXPECT_EQ(t->pipeline[1].replicas, 1);
  EXPECT_EQ(t->pipeline[2].end, 17u); // 16 backbone layers + the classifier
  for (const char* schedule : {"gpipe", "1f1b-flush"}) {
    auto flush = parse_pipeline(std::string("pipeline:\n  schedule: ") + schedule
                                + "\n  stages: [{last_layer: fc2}]\n");
    ASSERT_TRUE(flush) << baton::describe(flush.error());
    EXPECT_EQ(flush->schedule, schedule);
    EXPECT_FALSE(flush->vertical_sync);
  }
}

TEST_F(planning_test, bad_pipeline_sections_name_the_line) {
  // Line 6 is the first line of the section below: pipeline_base has 5 lines.
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages:\n    - {last_layer: conv9}\n"))
              .find("p.yaml:8: 'pipeline.stages.0.last_layer' names unknown layer 'conv9'"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages:\n    - {last_layer: pool2}\n"
                                    "    - {last_layer: pool1}\n    - {last_layer: fc2}\n"))
              .find("p.yaml:9: 'pipeline.stages.1.last_layer' is 'pool1', which does not come "
                    "after 'pool2'"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages:\n    - {last_layer: pool2}\n"))
              .find("the model's last layer 'fc2'"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages:\n    - {last_layer: fc2, replicas: 0}\n"))
              .find("p.yaml:8:"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  schedule: pipedream\n  stages: "
                                    "[{last_layer: fc2}]\n"))
              .find("p.yaml:7:"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  schedule: gpipe\n  vertical_sync: true\n"
                                    "  stages: [{last_layer: fc2}]\n"))
              .find("p.yaml:8: 'pipeline.vertical_sync' applies to schedule 1f1b only"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stagez: []\n")).find("unknown key 'stagez'"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("")).find("needs a 'pipeline' section"), std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages: [{last_layer: fc2}]\n", "transfer"))
              .find("only read with job: pipeline"),
            std::string::npos);
  EXPECT_NE(error_of(parse_pipeline("pipeline:\n  stages: [{last_layer: fc2, node: n1}]\n"))
              .find("no nodes"),
            std::string::npos);
}
