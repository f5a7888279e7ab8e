// `baton compare` from the real binary: every strategy of the catalogue on a
// tiny workload the test writes (Fashion-MNIST, 512 training samples, over 2
// local node processes without --link, so that it runs anywhere), each a row
// of the table and of report.json (reached or not) or skipped with its
// reason; and bad input, each exit code 2 with a message naming it.

#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"

namespace {

using namespace baton::testing;
using nlohmann::json;

/// A workload of every strategy's size: the mlp of data-parallel and IST
/// (pipeline, which splits a backbone, does not apply to it).
std::string write_workload(const std::string& dir, const std::string& model_section) {
  auto path = dir + "/tiny.yaml";
  std::ofstream{path} << "seed: 42\n"
                         "data:\n"
                         "  dataset: fashion-mnist\n"
                         "  dir: /usr/share/datasets/fashion-mnist\n"
                         "  train_limit: 512\n"
                         "  test_limit: 200\n"
                         "  batch_size: 64\n"
                         "  epochs: 2\n"
                         "backbone:\n"
                         "  checkpoint: none\n"
                         "  pretrain: {optimizer: {lr: 0.05, momentum: 0.9}}\n"
                      << model_section
                      << "tasks:\n"
                         "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
                         "task: all10\n";
  return path;
}

const char* mlp_sections = "data_parallel: {model: ist_mlp, hidden: [256]}\n"
                           "ist: {hidden: [256], local_steps: 2}\n";

const std::vector<std::string> catalogue{"local", "data-parallel:ring", "data-parallel:ps",
                                         "data-parallel:local-sgd", "pipeline:1f1b",
                                         "pipeline:gpipe", "ist", "fine-tune:adaptive"};

json read_json(const std::string& path) {
  std::ifstream in{path};
  return json::parse(in, nullptr, false);
}

TEST(compare, every_strategy_is_a_row_or_skipped_with_its_reason) {
  scratch_dir dir{"compare"};
  auto workload = write_workload(dir.path(), mlp_sections);
  auto out = dir.path() + "/out";
  auto run = run_baton({"compare", workload, "--local-nodes", "2", "--target", "0.5", "--out",
                        out});
  ASSERT_EQ(run.exit_code, 0) << run.text;
  EXPECT_NE(run.text.find("time to target"), std::string::npos) << run.text;
  auto report = read_json(out + "/report.json");
  ASSERT_TRUE(report.is_object()) << "report.json does not parse";
  EXPECT_EQ(report["schema"], "baton-report/1");
  for (const char* key : {"created", "workload", "cluster", "machine", "runs", "skipped"})
    EXPECT_TRUE(report.contains(key)) << key;
  EXPECT_EQ(report["workload"]["target"], 0.5);
  EXPECT_EQ(report["cluster"]["local_nodes"], 2);
  EXPECT_GT(report["machine"]["cpus"].get<int>(), 0);
  std::set<std::string> seen;
  for (const auto& r : report["runs"]) {
    seen.insert(r["strategy"].get<std::string>());
    ASSERT_TRUE(r.contains("summary")) << r.dump(); // none failed
    const auto& s = r["summary"];
    for (const char* key : {"reached", "time_to_target_seconds", "best_accuracy",
                            "samples_per_second", "bytes_per_step", "bytes_per_epoch",
                            "peak_rss_bytes", "cpu_utilisation", "time_split", "curve"})
      EXPECT_TRUE(s.contains(key)) << r["strategy"] << " " << key;
    EXPECT_TRUE(r["command"].get<std::string>().rfind("baton run ", 0) == 0) << r["command"];
    EXPECT_NE(run.text.find(r["strategy"].get<std::string>()), std::string::npos);
  }
  for (const auto& s : report["skipped"]) {
    seen.insert(s["strategy"].get<std::string>());
    EXPECT_FALSE(s["reason"].get<std::string>().empty()) << s.dump();
  }
  for (const auto& name : catalogue)
    EXPECT_EQ(seen.count(name), 1u) << name << " is neither a row nor skipped";
  // The mlp runs under local, data-parallel and IST; pipeline splits a backbone.
  for (const auto& name : {"local", "data-parallel:ring", "ist"})
    EXPECT_TRUE(std::any_of(report["runs"].begin(), report["runs"].end(),
                            [&](const json& r) { return r["strategy"] == name; }))
      << name;
  EXPECT_NE(run.text.find("skipped pipeline:1f1b"), std::string::npos) << run.text;
  // The ring ran over 2 nodes: bytes on the wire; local sent none.
  for (const auto& r : report["runs"]) {
    auto bytes = r["summary"]["bytes_per_epoch"].get<double>();
    if (r["strategy"] == "data-parallel:ring")
      EXPECT_GT(bytes, 0);
    if (r["strategy"] == "local")
      EXPECT_EQ(bytes, 0);
  }
}

TEST(compare, bad_input_is_exit_2_with_the_reason) {
  scratch_dir dir{"compare-bad"};
  auto workload = write_workload(dir.path(), mlp_sections);
  auto out = dir.path() + "/out";
  struct bad {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad> cases{
    {{"--strategies", "data-paralel:ring"}, "did you mean 'data-parallel:ring'"},
    {{"--strategies", "pipeline:1f1b"}, "pipeline:1f1b does not apply"},
    {{"--target", "1.0"}, "--budget"},
    {{"--target", "1.5"}, "outside (0, 1]"},
    {{"--link", "1gbit"}, "--link needs --local-nodes"},
    // Issue 32 item 18: not finite, or absurd (a budget of 1e308 s started the runs).
    {{"--budget", "inf"}, "--budget expects a number of seconds"},
    {{"--budget", "1e308"}, "--budget expects a number of seconds"},
    {{"--target", "nan"}, "--target expects a positive number"},
    {{"--latency", "inf", "--predict", "2"}, "--latency expects a latency in seconds"},
    {{"--bandwidth", "1e308", "--predict", "2"}, "--bandwidth expects a number of bytes"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"compare", workload, "--out", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto run = run_baton(args);
    EXPECT_EQ(run.exit_code, 2) << c.args.front() << ": " << run.text;
    EXPECT_NE(run.text.find(c.says), std::string::npos) << run.text;
  }
  auto missing = run_baton({"compare", dir.path() + "/nope.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.text.find("nope.yaml"), std::string::npos) << missing.text;
}

} // namespace
