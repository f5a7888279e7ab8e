// `baton predict` on the real binary (issue 24 section 2, docs/cost-model.md):
// a tiny mlp workload with a given link prints every strategy and writes the
// predictions object with its documented fields; the link measured on the
// loopback (and on an emulated link where we are root) is kept once per
// link; bad input is exit 2 naming what was wrong; a signal while it
// simulates stops it.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/baton_process.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;
using json = nlohmann::json;

namespace {

/// Fashion-MNIST's first 512 training and 200 test samples.
constexpr const char* tiny_fashion_mnist = R"(  dataset: fashion-mnist
  dir: /usr/share/datasets/fashion-mnist
  train_limit: 512
  test_limit: 200
)";

/// configs/compare-mlp.yaml made tiny: a [64] mlp, on `data` (the lines of
/// the `data:` section but its batch and epochs).
std::string tiny_workload(const std::string& dir, const std::string& data = tiny_fashion_mnist) {
  const std::string path = dir + "/tiny.yaml";
  std::ofstream(path) << "seed: 42\ndata:\n" << data << R"(  batch_size: 32
  epochs: 1
backbone:
  checkpoint: none
data_parallel:
  model: ist_mlp
  hidden: [64]
ist:
  hidden: [64]
  local_steps: 4
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
task: all10
)";
  return path;
}

json read_prediction_json(const std::string& path) {
  return json::parse(read_text(path));
}

const std::vector<std::string> modelled = {"local", "data-parallel:ring", "data-parallel:ps",
                                           "data-parallel:local-sgd", "ist"};

} // namespace

TEST(predict, every_strategy_with_a_given_link) {
  scratch_dir dir("predict");
  const std::string out = dir.path() + "/predictions.json";
  auto r = run_baton({"predict", tiny_workload(dir.path()), "--latency", "0.0001", "--bandwidth",
                      "1gbit,10gbit", "--hosts", "2,4", "--measured-hosts", "2", "--json", out});
  ASSERT_EQ(r.exit_code, 0) << r.text;
  for (const auto& name : modelled)
    EXPECT_TRUE(contains(r.text, name)) << name << "\n" << r.text;
  EXPECT_TRUE(contains(r.text, "predicted at 1 Gbit/s")) << r.text;
  EXPECT_TRUE(contains(r.text, "predicted at 10 Gbit/s")) << r.text;
  EXPECT_TRUE(contains(r.text, "crossovers")) << r.text;

  const json p = read_prediction_json(out);
  for (const char* key : {"bandwidth", "latency", "message_overhead", "measured_on", "method"})
    EXPECT_TRUE(p["link"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(p["link"]["latency"].get<double>(), 0.0001);
  EXPECT_DOUBLE_EQ(p["link"]["bandwidth"].get<double>(), 125e6);
  // A given link measures nothing: no runtime costs either.
  EXPECT_DOUBLE_EQ(p["runtime"].value("remote_message_seconds", -1.0), 0) << p["runtime"];
  EXPECT_TRUE(contains(p["runtime"].value("method", ""), "--latency")) << p["runtime"];
  EXPECT_EQ(p["profile"]["model"], "ist_mlp");
  EXPECT_GT(p["profile"]["layers"].get<int>(), 0);
  EXPECT_TRUE(p["profile"].contains("batch"));
  std::set<std::string> measured, projected;
  for (const auto& row : p["measured"]) {
    for (const char* key : {"strategy", "hosts", "step_seconds", "compute_seconds",
                            "communication_seconds", "waiting_seconds", "bytes_per_step",
                            "samples_per_second"})
      EXPECT_TRUE(row.contains(key)) << key << " in " << row;
    EXPECT_GT(row["step_seconds"].get<double>(), 0) << row;
    // Simulated from the plan (issue 34), the formula inside as the cross-check.
    EXPECT_EQ(row.value("method", ""), "simulation") << row;
    EXPECT_GT(row["formula"].value("step_seconds", 0.0), 0) << row;
    // A data-parallel worker's and a pipeline's layers sum to the model's
    // step timed whole (`local` takes its loop's, IST its rounds').
    const std::string name = row["strategy"];
    const bool scaled = name.rfind("data-parallel:", 0) == 0 || name.rfind("pipeline:", 0) == 0;
    EXPECT_EQ(row.contains("layers_scaled_to_step_seconds"), scaled) << row;
    if (scaled)
      EXPECT_GT(row["layers_scaled_to_step_seconds"].get<double>(), 0) << row;
    measured.insert(name);
  }
  for (const auto& row : p["projection"]) {
    for (const char* key : {"strategy", "hosts", "bandwidth_bits", "step_seconds",
                            "samples_per_second"})
      EXPECT_TRUE(row.contains(key)) << key << " in " << row;
    EXPECT_EQ(row.value("method", ""), "simulation") << row;
    projected.insert(row["strategy"]);
  }
  for (const auto& name : modelled) {
    EXPECT_TRUE(measured.count(name)) << name;
    EXPECT_TRUE(projected.count(name)) << name;
  }
  // Every strategy predicted at 2 x 2 points of the grid.
  EXPECT_EQ(p["projection"].size(), 4 * projected.size());
  EXPECT_TRUE(p["crossovers"].is_array());
  EXPECT_EQ(p.value("crossovers_method", ""), "simulation");
  EXPECT_TRUE(contains(p.value("note", ""), "statistical efficiency at larger W is not predicted"))
    << p["note"];
}

// Issue 34: a workload's epoch and test split are read from its files'
// headers, whatever their kind: an npy workload's evaluation had been
// predicted at nothing (only Fashion-MNIST's sizes were known).
TEST(predict, an_npy_workload_s_evaluation_is_predicted_from_its_files) {
  scratch_dir dir("predict-npy");
  write_npy_pair(dir.path() + "/x_train.npy", dir.path() + "/y_train.npy",
                 make_samples(256, 1, 8, 8, 10, 1));
  write_npy_pair(dir.path() + "/x_test.npy", dir.path() + "/y_test.npy",
                 make_samples(128, 1, 8, 8, 10, 2));
  const std::string path = tiny_workload(dir.path(), R"(  kind: npy
  train: {x: x_train.npy, y: y_train.npy}
  test: {x: x_test.npy, y: y_test.npy}
)");
  const std::string out = dir.path() + "/predictions.json";
  auto r = run_baton({"predict", path, "--strategies", "local,data-parallel:ring", "--latency",
                      "0.0001", "--bandwidth", "1gbit", "--hosts", "2", "--measured-hosts", "2",
                      "--json", out});
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const json p = read_prediction_json(out);
  ASSERT_FALSE(p["measured"].empty()) << p;
  for (const auto& row : p["measured"])
    EXPECT_GT(row.value("evaluation_seconds", 0.0), 0) << row;
}

// Issue 35 item 7: the workload's `optimizer:` steps the profiled model
// (AdamW's step is a cost of its own); IST, which takes SGD steps only, is
// not predicted, with the reason.
TEST(predict, the_workload_optimizer_is_profiled_and_ist_is_skipped_naming_it) {
  scratch_dir dir("predict-adamw");
  std::string path = tiny_workload(dir.path());
  std::ofstream(path, std::ios::app) << "optimizer: {name: adamw, lr: 0.002, schedule: cosine}\n";
  const std::string out = dir.path() + "/predictions.json";
  auto r = run_baton({"predict", path, "--latency", "0.0001", "--bandwidth", "1gbit", "--hosts",
                      "2", "--measured-hosts", "2", "--json", out});
  ASSERT_EQ(r.exit_code, 0) << r.text;
  EXPECT_TRUE(contains(r.text, "stepped by adamw")) << r.text;
  const json p = read_prediction_json(out);
  EXPECT_EQ(p["profile"]["optimizer"], "adamw") << p["profile"];
  bool ist_skipped = false;
  for (const auto& s : p["skipped"])
    if (s["strategy"] == "ist") {
      ist_skipped = true;
      EXPECT_TRUE(contains(s["reason"].get<std::string>(), "adamw is not supported")) << s;
    }
  EXPECT_TRUE(ist_skipped) << p["skipped"];
  std::set<std::string> measured;
  for (const auto& row : p["measured"])
    measured.insert(row["strategy"]);
  for (const char* name : {"local", "data-parallel:ring", "data-parallel:ps"})
    EXPECT_TRUE(measured.count(name)) << name << " " << p["measured"];
}

// The loopback's sockets and the runtime beside them (a real `baton node`),
// each measured once and kept; a runtime file of another machine is
// measured again.
TEST(predict, the_loopback_and_the_runtime_are_measured_once_and_kept) {
  scratch_dir dir("predict-loopback");
  const std::string workload = tiny_workload(dir.path());
  const std::vector<std::string> args = {"predict", workload, "--strategies",
                                         "data-parallel:ring", "--hosts", "2", "--out",
                                         dir.path(), "--json", dir.path() + "/p.json"};
  auto first = run_baton(args);
  ASSERT_EQ(first.exit_code, 0) << first.text;
  const json kept = read_prediction_json(dir.path() + "/link-loopback.json");
  EXPECT_GT(kept["bandwidth"].get<double>(), 0);
  EXPECT_GE(kept["latency"].get<double>(), 0);
  EXPECT_GE(kept["message_overhead"].get<double>(), 0);
  EXPECT_FALSE(kept["samples"].empty());
  EXPECT_TRUE(contains(kept["method"].get<std::string>(), "ping-pong")) << kept;
  const std::string runtime_file = dir.path() + "/runtime.json";
  const json runtime = read_prediction_json(runtime_file);
  // A message to another process's actor takes longer than to one of this
  // process, and a 4 MB tensor longer than a bare message.
  EXPECT_GT(runtime["local_round_trip"].get<double>(), 0) << runtime;
  EXPECT_GT(runtime["remote_round_trip"].get<double>(), runtime["local_round_trip"].get<double>())
    << runtime;
  ASSERT_EQ(runtime["samples"].size(), 4u) << runtime;
  EXPECT_GT(runtime["samples"][3]["seconds"].get<double>(),
            runtime["remote_round_trip"].get<double>()) << runtime;
  for (const char* key :
       {"message_seconds", "remote_message_seconds", "byte_seconds", "io_byte_seconds"})
    EXPECT_GE(runtime[key].get<double>(), 0) << key << " in " << runtime;
  // Both processes' CPU per trip, read around each size's trips: a 4 MB
  // tensor takes more of it than 64 kB (copies at both ends).
  ASSERT_EQ(runtime["cpu_samples"].size(), 4u) << runtime;
  EXPECT_GT(runtime["cpu_samples"][3]["seconds"].get<double>(),
            runtime["cpu_samples"][0]["seconds"].get<double>()) << runtime;
  EXPECT_FALSE(runtime["machine"].get<std::string>().empty());
  auto second = run_baton(args);
  ASSERT_EQ(second.exit_code, 0) << second.text;
  // The second run reads the same figures back.
  const json p = read_prediction_json(dir.path() + "/p.json");
  EXPECT_EQ(p["link"]["bandwidth"], kept["bandwidth"]);
  EXPECT_EQ(p["runtime"]["remote_message_seconds"], runtime["remote_message_seconds"]);
  EXPECT_EQ(p["runtime"]["cache_file"], runtime_file);

  // A file kept before a message's CPU was measured is measured again.
  json older = runtime;
  older.erase("io_byte_seconds");
  older["remote_message_seconds"] = 0.5;
  std::ofstream(runtime_file) << older.dump();
  ASSERT_EQ(run_baton(args).exit_code, 0);
  EXPECT_TRUE(read_prediction_json(runtime_file).contains("io_byte_seconds"));
  EXPECT_LT(read_prediction_json(runtime_file)["remote_message_seconds"].get<double>(), 0.5);

  json elsewhere = runtime;
  elsewhere["machine"] = "another CPU, 96 cores";
  elsewhere["remote_message_seconds"] = 0.5;
  std::ofstream(runtime_file) << elsewhere.dump();
  auto third = run_baton(args);
  ASSERT_EQ(third.exit_code, 0) << third.text;
  EXPECT_EQ(read_prediction_json(runtime_file)["machine"], runtime["machine"]);
  EXPECT_LT(read_prediction_json(runtime_file)["remote_message_seconds"].get<double>(), 0.5);
}

// The ping-pong between two of three emulated hosts, and the all-to-all
// among the three (the share of the rate a link shared by two connections
// delivers). A file kept before the all-to-all was measured is measured
// again.
TEST(predict, an_emulated_link_is_measured_over_namespaces) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "emulated links need root (network namespaces and tc)";
  scratch_dir dir("predict-link");
  std::ofstream(dir.path() + "/link-100mbit.json") <<
    R"({"bandwidth": 1.0, "latency": 0.0, "message_overhead": 0.0, "burst": 0.0,
        "measured_on": "emulated link 100mbit between 2 emulated hosts"})";
  auto r = run_baton({"predict", tiny_workload(dir.path()), "--strategies", "data-parallel:ps",
                      "--hosts", "3", "--link", "100mbit", "--out", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const json kept = read_prediction_json(dir.path() + "/link-100mbit.json");
  EXPECT_TRUE(contains(kept["measured_on"].get<std::string>(), "emulated link 100mbit between 3"))
    << kept;
  EXPECT_GT(kept["bandwidth"].get<double>(), 1e6);
  EXPECT_GT(kept["shared_efficiency"].get<double>(), 0);
  EXPECT_LE(kept["shared_efficiency"].get<double>(), 1);
  EXPECT_EQ(kept["exchange_seconds"].size(), 5u) << kept;
}

TEST(predict, bad_input_is_exit_2_naming_it) {
  scratch_dir dir("predict-bad");
  const std::string workload = tiny_workload(dir.path());
  const std::vector<std::string> given = {"--latency", "0"};
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad_case> cases = {
    {{"predict"}, "WORKLOAD.yaml"},
    {{"predict", dir.path() + "/missing.yaml"}, "missing.yaml"},
    {{"predict", workload, "--strategies", "data-paralel:ring"}, "did you mean"},
    {{"predict", workload, "--hosts", "0"}, "--hosts"},
    {{"predict", workload, "--bandwidth", "fast"}, "fast"},
    {{"predict", workload, "--latency", "-1"}, "--latency"},
    {{"predict", workload, "--link", "1gbit,soon"}, "--link"},
    {{"predict", workload, "--hots", "2"}, "did you mean"},
  };
  for (const auto& c : cases) {
    auto r = run_baton(with(c.args, given));
    EXPECT_EQ(r.exit_code, 2) << r.text;
    EXPECT_TRUE(contains(r.text, c.says)) << c.says << "\n" << r.text;
  }
}

// Issue 32 item 18: `--latency inf` (and 1e308) was accepted and printed inf
// and -nan rows. Every number flag refuses what is not finite or is absurd,
// with exit 2 and the range it takes.
TEST(predict, non_finite_and_absurd_numbers_are_refused) {
  scratch_dir dir("predict-numbers");
  const std::string workload = tiny_workload(dir.path());
  const std::vector<std::pair<std::string, std::string>> cases = {
    {"--latency", "inf"},   {"--latency", "1e308"}, {"--latency", "nan"},
    {"--latency", "1e999"}, {"--latency", "11"},    {"--bandwidth", "inf"},
    {"--bandwidth", "1e308"}, {"--bandwidth", "nan"}, {"--bandwidth", "1e999"},
    {"--bandwidth", "1gbit,inf"}, {"--hosts", "1e308"},
  };
  for (const auto& [flag, value] : cases) {
    auto r = run_baton({"predict", workload, flag, value, "--latency", "0"});
    EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.text;
    EXPECT_TRUE(contains(r.text, "baton: " + flag + " expects ")) << r.text;
    EXPECT_FALSE(contains(r.text, "predicted at")) << r.text;
  }
  // The edges of the ranges are taken.
  auto r = run_baton({"predict", workload, "--latency", "10", "--bandwidth", "125,12.5e9",
                      "--hosts", "2", "--strategies", "local,data-parallel:ring"});
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_FALSE(contains(r.text, "nan")) << r.text;
}

// The workload is read once (issue 36 item 1): its file replaced while
// baton predict profiles changes none of the strategies it predicts, at any
// host count. Each strategy and host count read the file again before: all
// but the first came out "not predicted: 'data' is not a map".
TEST(predict, the_workload_is_read_once_whatever_becomes_of_its_file) {
  scratch_dir dir("predict-read-once");
  const std::string out = dir.path() + "/predictions.json";
  const std::string workload = tiny_workload(dir.path());
  baton_process predict{{"predict", workload, "--strategies", "local,data-parallel:ring,ist",
                         "--latency", "0.0001", "--hosts", "2,4", "--json", out},
                        dir.path() + "/predict.log"};
  ASSERT_TRUE(predict.await_output("profiling", std::chrono::seconds(120))) << predict.output();
  std::ofstream(workload, std::ios::trunc) << "data: [replaced while predicting]\n";
  ASSERT_EQ(predict.wait(), 0) << predict.output();
  const json p = read_prediction_json(out);
  EXPECT_EQ(p["skipped"], json::array()) << p["skipped"].dump();
  std::set<std::pair<std::string, int32_t>> projected;
  for (const auto& row : p["projection"])
    projected.insert({row.value("strategy", ""), row.value("hosts", 0)});
  for (const char* name : {"local", "data-parallel:ring", "ist"})
    for (int32_t hosts : {2, 4})
      EXPECT_EQ(projected.count({name, hosts}), 1u) << name << " at " << hosts << " hosts";
}

// A signal while the projection to 64 hosts is simulated (tens of seconds on
// the default grid) stops predict at the next simulation: exit 130, and no
// predictions file.
TEST(predict, a_signal_while_simulating_stops_it_and_writes_nothing) {
  scratch_dir dir("predict-signal");
  const std::string out = dir.path() + "/predictions.json";
  baton_process predict{{"predict", tiny_workload(dir.path()), "--latency", "0.0001", "--json",
                         out},
                        dir.path() + "/predict.log"};
  ASSERT_TRUE(predict.await_output("simulating", std::chrono::seconds(240))) << predict.output();
  predict.signal(SIGINT);
  // A bound, not a timing: the stop watchdog ends baton 15 s after the signal.
  const int code = predict.wait_for(std::chrono::seconds(120));
  const auto text = predict.output();
  ASSERT_NE(code, -1) << "still running 120 s after SIGINT:\n" << text;
  EXPECT_EQ(code, 130) << text;
  EXPECT_TRUE(contains(text, "interrupted")) << text;
  EXPECT_FALSE(std::ifstream(out).good()) << "wrote " << out << ":\n" << text;
}

// `--profile F` served every strategy whose model has F's model's name,
// whatever it was profiled on: a profile of the mlp at 1x28x28 and [64]
// predicted a workload of 1x20x20 samples, or of [32]. F now records its
// samples' shape, and its layers' names and sizes must be the workload's
// model's; a profile that does not fit is refused naming the difference.
TEST(predict, a_profile_of_another_shape_or_width_is_refused) {
  scratch_dir dir("predict-profile");
  const std::string workload = tiny_workload(dir.path());
  const std::string topology = dir.path() + "/dp.yaml";
  std::ofstream(topology) << "job: data-parallel\nseed: 42\ndata:\n"
                          << tiny_fashion_mnist << R"(  batch_size: 32
backbone:
  checkpoint: none
data_parallel:
  model: ist_mlp
  hidden: [64]
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
task: all10
)";
  const std::string profile = dir.path() + "/p.json";
  auto made = run_baton({"profile", topology, "--out", profile});
  ASSERT_EQ(made.exit_code, 0) << made.text;
  EXPECT_EQ(read_prediction_json(profile)["sample_shape"], json::parse("[1, 28, 28]"));
  const std::vector<std::string> predict{
    "predict", workload, "--profile", profile, "--latency",    "0.0001",
    "--bandwidth", "1gbit", "--hosts", "2",    "--strategies", "data-parallel:ring"};
  auto fits = run_baton(predict);
  EXPECT_EQ(fits.exit_code, 0) << fits.text;
  auto narrower = run_baton(
    with(predict, {"--set", "data_parallel.hidden=[32]", "--set", "ist.hidden=[32]"}));
  EXPECT_EQ(narrower.exit_code, 2) << narrower.text;
  EXPECT_TRUE(contains(narrower.text, "--profile: it profiled a ist_mlp of other layers than this "
                                      "workload's: its layer 2 is fc1 (200704 bytes of "
                                      "parameters), this workload's fc1 (100352"))
    << narrower.text;
  auto smaller = run_baton(with(predict, {"--set", "data.dataset=synthetic", "--set",
                                          "data.synthetic_shape=[1, 20, 20]"}));
  EXPECT_EQ(smaller.exit_code, 2) << smaller.text;
  EXPECT_TRUE(contains(smaller.text, "it profiled ist_mlp on samples of 1x28x28, this "
                                     "workload's are 1x20x20"))
    << smaller.text;
}
