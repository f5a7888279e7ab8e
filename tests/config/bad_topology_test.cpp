// Bad topology files, as a user meets them: exit code 2 and a message naming
// the file, the line and what was expected.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/topology_fixture.hpp"

using namespace baton::testing;

namespace {

const std::string valid_prefix =
  "job: transfer\n"
  "data: {dataset: synthetic, synthetic_train: 64, synthetic_test: 32, batch_size: 16}\n" +
  std::string{small_transfer_end};

class bad_topology : public ::testing::Test {
protected:
  /// Writes `text` to NAME.yaml in this test's directory; returns its path.
  std::string write_topology(const std::string& name, const std::string& text) const {
    auto path = dir_.path() + "/" + name + ".yaml";
    std::ofstream{path} << text;
    return path;
  }

  scratch_dir dir_{"bad-topology"};
};

} // namespace

TEST_F(bad_topology, unknown_key_names_file_and_line) {
  auto path = write_topology("unknown", std::string{valid_prefix} + "runtime:\n  windw: 4\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("windw"), std::string::npos) << out.text;
}

TEST_F(bad_topology, wrong_type_names_file_and_line) {
  auto path = write_topology("type", std::string{valid_prefix} + "runtime:\n  window: four\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("four"), std::string::npos) << out.text;
}

TEST_F(bad_topology, missing_file) {
  auto out = run_baton({"run", "/nonexistent/topology.yaml"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("/nonexistent/topology.yaml"), std::string::npos) << out.text;
}

TEST_F(bad_topology, split_point_out_of_range) {
  std::string text = valid_prefix;
  text.replace(text.find("[pool1]"), 7, "[pool9]");
  auto path = write_topology("split", text);
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":3"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("pool9"), std::string::npos) << out.text;
}

TEST_F(bad_topology, unreachable_node) {
  // Port 1 on loopback: nothing listens there for an unprivileged service.
  auto path = write_topology("node", std::string{valid_prefix} +
                                       "nodes:\n  - {name: n1, host: 127.0.0.1, port: 1}\n");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":9: node 'n1'"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("unreachable"), std::string::npos) << out.text;
}

TEST_F(bad_topology, bad_override) {
  auto out = run_baton({"run", source_path("configs/transfer.yaml"), "--set", "data.epochs=x"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("data.epochs"), std::string::npos) << out.text;
}

// -- hostile and careless input (issue 9) ---------------------------------------------
// Run bounded (a time and an address-space limit): before the fixes these
// read or allocated without end.

// Item 8: `baton run /dev/zero` read ~800 MB/s until killed; a FIFO blocks.
TEST_F(bad_topology, devices_and_fifos_are_refused_unread) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    auto out = run_baton_bounded({"run", device});
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_NE(out.text.find(std::string{"cannot read topology file '"} + device +
                            "': not a regular file (a character device)"),
              std::string::npos)
      << out.text;
  }
  auto fifo = dir_.path() + "/topology.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto out = run_baton_bounded({"run", fifo});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("not a regular file (a FIFO or pipe)"), std::string::npos) << out.text;
}

// Item 8: every file the CLI reads as config: node.yaml, a plan's profile.
TEST_F(bad_topology, node_config_and_profile_from_a_device_are_refused) {
  auto node = run_baton_bounded({"node", "--config", "/dev/zero"});
  EXPECT_EQ(node.exit_code, 2) << node.text;
  EXPECT_NE(node.text.find("cannot read node file '/dev/zero': not a regular file"),
            std::string::npos)
    << node.text;
  auto plan = run_baton_bounded({"plan", "--profile", "/dev/urandom", "--machines", "2"});
  EXPECT_EQ(plan.exit_code, 2) << plan.text;
  EXPECT_NE(plan.text.find("/dev/urandom: cannot read the profile: not a regular file"),
            std::string::npos)
    << plan.text;
}

// Item 4: a 50 MB list took 9.76 GB and ended in std::bad_alloc with no line.
TEST_F(bad_topology, a_huge_topology_is_refused_by_its_size) {
  std::string labels = "[0";
  while (labels.size() < (size_t{4} << 20))
    labels += ", 0";
  std::string text = valid_prefix;
  text.insert(text.find("heads:"), "  - {name: t, labels: " + labels + "]}\n");
  auto path = write_topology("huge", text);
  auto out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text.substr(0, 1000);
  EXPECT_NE(out.text.find("more than the 262144 (256 KiB) a config file may have"),
            std::string::npos)
    << out.text.substr(0, 1000);
}

// Items 4 and 5: a long list names its key and line; a long value is quoted
// by a prefix (it was repeated whole: a 52 MB log line).
TEST_F(bad_topology, long_lists_and_values_make_short_errors) {
  std::string labels = "[0";
  for (int i = 0; i < 50000; ++i)
    labels += ", 0";
  std::string text = valid_prefix;
  text.insert(text.find("heads:"), "  - {name: t, labels: " + labels + "]}\n");
  auto path = write_topology("list", text);
  auto out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text.substr(0, 1000);
  EXPECT_NE(out.text.find(path + ":6: 'tasks.1.labels' must map the 10 classes of synthetic, got "
                                 "50001 labels"),
            std::string::npos)
    << out.text.substr(0, 1000);
  path = write_topology("value", std::string{valid_prefix} + "runtime: {window: " +
                                   std::string(200000, '7') + "x}\n");
  out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text.substr(0, 1000);
  EXPECT_NE(out.text.find(path + ":8: 'runtime.window' must be a positive integer, got '777"),
            std::string::npos)
    << out.text.substr(0, 1000);
  EXPECT_NE(out.text.find("...' (200001 bytes)"), std::string::npos) << out.text.substr(0, 1000);
  EXPECT_LT(out.text.size(), 1000u);
}

// Item 6: 771k heads spawned 668 actors, then hung.
TEST_F(bad_topology, too_many_heads_is_an_error_with_the_range) {
  std::string heads = "heads:\n";
  for (int i = 0; i < 100000; ++i)
    heads += "  - {name: h" + std::to_string(i) + ", task: all10}\n";
  std::string text = valid_prefix;
  text = text.substr(0, text.find("heads:")) + heads;
  // Too large a file first; under the size limit, too many heads.
  auto out = run_baton_bounded({"run", write_topology("heads", text)});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("a config file may have"), std::string::npos) << out.text;
  text = text.substr(0, text.find("  - {name: h200,"));
  auto path = write_topology("heads200", text);
  out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":6: 'heads' has 200 entries, more than the 64 allowed"),
            std::string::npos)
    << out.text;
}

// Item 9: scheduler_threads=100000 aborted (exit 134); stage_threads=100000
// made threads until the process could make no more, deaf to SIGTERM.
TEST_F(bad_topology, thread_counts_out_of_range_are_bad_input) {
  auto path = write_topology("threads", valid_prefix);
  for (const char* set : {"runtime.scheduler_threads=100000", "runtime.compute_threads=100000",
                          "runtime.stage_threads=100000", "runtime.head_threads=0"}) {
    auto out = run_baton_bounded({"run", path, "--set", set});
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_NE(out.text.find("must be a number of threads"), std::string::npos) << out.text;
  }
  for (const char* threads : {"100000", "0"}) {
    auto node = run_baton_bounded({"node", "--scheduler-threads", threads});
    EXPECT_EQ(node.exit_code, 2) << node.text;
    EXPECT_NE(node.text.find("--scheduler-threads"), std::string::npos) << node.text;
    EXPECT_NE(node.text.find("from 1 to 64, got"), std::string::npos) << node.text;
  }
  auto config = dir_.path() + "/node.yaml";
  std::ofstream{config} << "name: n1\nscheduler_threads: 100000\n";
  auto node = run_baton_bounded({"node", "--config", config});
  EXPECT_EQ(node.exit_code, 2) << node.text;
  EXPECT_NE(node.text.find(config + ":2: 'scheduler_threads' must be an integer from 1 to 64"),
            std::string::npos)
    << node.text;
}

// The common budget under its new name and its older one at once; a budget
// of job: transfer's own (head_threads) under another job.
TEST_F(bad_topology, thread_budgets_given_twice_or_to_the_wrong_job_name_the_key) {
  auto path = write_topology("both", std::string{valid_prefix} +
                                       "runtime:\n  compute_threads: 1\n  stage_threads: 1\n");
  auto out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":10: give runtime.compute_threads or runtime.stage_threads, "
                                 "not both (runtime.stage_threads is its older name)"),
            std::string::npos)
    << out.text;
  path = write_topology("pipeline", R"(job: pipeline
data: {dataset: synthetic, synthetic_train: 64, synthetic_test: 32, batch_size: 16}
backbone: {model: convnet, checkpoint: ""}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
runtime: {head_threads: 2}
)");
  out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":6: 'runtime.head_threads' is read only by jobs that run the "
                                 "backbone frozen (job: transfer); job: pipeline does not"),
            std::string::npos)
    << out.text;
}

// Item 10: label 99 gave a 100-way head; 1e8 a 51 GB allocation and a
// 62-frame backtrace.
TEST_F(bad_topology, a_task_class_beyond_the_dataset_classes_names_its_line) {
  std::string text = valid_prefix;
  text.replace(text.find("8, 9]"), 5, "8, 100000000]");
  auto path = write_topology("label", text);
  auto out = run_baton_bounded({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":5: 'tasks.0.labels.9' must be a task class from 0 to 9 "
                                 "(synthetic has 10 classes; a task has at most as many), got "
                                 "'100000000'"),
            std::string::npos)
    << out.text;
}

// Item 11: a missing dataset directory exited 1 (a failed run), not 2.
TEST_F(bad_topology, a_missing_dataset_directory_is_bad_input) {
  std::string text = valid_prefix;
  text.replace(text.find("{dataset: synthetic, synthetic_train: 64, synthetic_test: 32,"),
               62, "{dir: /nonexistent/fashion-mnist, train_limit: 64, test_limit: 32,");
  auto path = write_topology("dataset", text);
  for (auto mode : std::vector<std::vector<std::string>>{{}, {"--mode", "local"}}) {
    std::vector<std::string> args{"run", path};
    args.insert(args.end(), mode.begin(), mode.end());
    auto out = run_baton_bounded(args);
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_NE(out.text.find(path + ":2: cannot read the dataset fashion-mnist in "
                                   "'/nonexistent/fashion-mnist' (data.dir): "),
              std::string::npos)
      << out.text;
  }
}

// Item 19: a fault after the job's last step was accepted and never fired.
TEST_F(bad_topology, a_fault_past_the_last_step_is_refused) {
  auto path = write_topology("fault", valid_prefix);
  auto out = run_baton_bounded(
    {"run", path, "--fault", "kind=throw,actor=all10,at_step=4"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("'faults.0.at_step' is 4, but the job has 4 steps (1 epoch x 4 "
                          "minibatches of 16 from 64 training samples), so the fault would never "
                          "fire (expected a step from 0 to 3)"),
            std::string::npos)
    << out.text;
}

// Item 11: on a listed node the data is the node's to read, and its refusal
// of the source was a failed run (actor_failed, exit 1). It is bad input.
TEST_F(bad_topology, a_dataset_the_node_cannot_read_is_bad_input) {
  std::string text = valid_prefix;
  text.replace(text.find("{dataset: synthetic, synthetic_train: 64, synthetic_test: 32,"), 62,
               "{dir: /nonexistent/fashion-mnist, train_limit: 64, test_limit: 32,");
  auto path = write_topology("remote", text + "nodes:\n  - {name: n1, port: 1}\n");
  node_process node{dir_.path(), "n1"};
  auto out = run_baton_bounded(
    {"run", path, "--set", "nodes.0.port=" + std::to_string(node.port())}, 120, 0);
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("bad_file: cannot start source 'source' on node 'n1': bad_file: "
                          "/nonexistent/fashion-mnist/train-images-idx3-ubyte.gz: cannot open"),
            std::string::npos)
    << out.text;
}

namespace {

/// Writes `bytes` to `path` and gzips it in place (PATH.gz).
void write_gzipped(const std::string& path, const std::string& bytes) {
  std::ofstream{path, std::ios::binary} << bytes;
  ASSERT_EQ(run_shell("gzip -f " + quote(path)).exit_code, 0);
}

std::string big_endian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

/// A Fashion-MNIST directory `dir` of `n` training and `n` test samples.
void write_small_fashion_mnist(const std::string& dir, uint32_t n) {
  for (const char* split : {"train", "t10k"}) {
    std::string images = big_endian(2051) + big_endian(n) + big_endian(28) + big_endian(28);
    images += std::string(static_cast<size_t>(n) * 28 * 28, '\x40');
    std::string labels = big_endian(2049) + big_endian(n);
    for (uint32_t i = 0; i < n; ++i)
      labels += static_cast<char>(i % 10);
    write_gzipped(dir + "/" + split + "-images-idx3-ubyte", images);
    write_gzipped(dir + "/" + split + "-labels-idx1-ubyte", labels);
  }
}

} // namespace

// Item 19: where the job's length is known only on the node that reads the
// data, a fault past its end is said at the start of the run (it was silent).
TEST_F(bad_topology, a_fault_past_the_last_step_is_warned_when_known_only_at_run_time) {
  auto data = dir_.path() + "/fashion-mnist";
  std::filesystem::create_directory(data);
  write_small_fashion_mnist(data, 64);
  std::string text = valid_prefix;
  text.replace(text.find("{dataset: synthetic, synthetic_train: 64, synthetic_test: 32,"), 62,
               "{dir: " + data + ",");
  auto path = write_topology("late", text + "nodes:\n  - {name: n1, port: 1}\n");
  node_process node{dir_.path(), "n1"};
  auto out = run_baton_bounded({"run", path, "--set",
                                "nodes.0.port=" + std::to_string(node.port()), "--fault",
                                "kind=throw,actor=all10,at_step=4"},
                               300, 0);
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("at_step: 4}: fault 'throw' at step 4 will never fire: the job has 4 steps (64 "
                          "training samples per epoch in minibatches of 16)"),
            std::string::npos)
    << out.text;
}

// Batch norm in training needs 2 samples per step; a config that would give
// a step 1 is refused at load with its line, exit 2 (issue 21 item 8: it
// failed at the first step, and again at each of 3 restarts, then exit 1).
const char* batch_norm_job = R"(job: data-parallel
data: {dataset: synthetic, synthetic_shape: [1, 28, 28], synthetic_train: 64, synthetic_test: 32,
       batch_size: 16}
backbone: {checkpoint: none, pretrain: {task: all10}}
data_parallel: {workers: 2, model: mlp}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: all10, task: all10}
)";

TEST_F(bad_topology, a_batch_of_one_for_batch_norm_is_refused_at_load) {
  auto path = write_topology("batch-norm", batch_norm_job);
  auto out = run_baton({"run", path, "--set", "data.batch_size=1"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("data.batch_size is 1"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("batch norm"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("restart"), std::string::npos) << out.text; // nothing ran
  // With parameter shards: the same refusal.
  out = run_baton(
    {"run", path, "--set", "data.batch_size=1", "--set", "data_parallel.exchange=ps"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("batch norm"), std::string::npos) << out.text;
  // The convnet has no batch norm: one sample per step trains (one epoch of 64 steps).
  out = run_baton({"run", path, "--set", "data.batch_size=1", "--set",
                   "data_parallel.model=convnet", "--set", "data.synthetic_train=8"});
  EXPECT_EQ(out.exit_code, 0) << out.text;
}

TEST_F(bad_topology, a_last_minibatch_of_one_for_batch_norm_is_refused_at_load) {
  // 66 samples: 33 per worker, minibatches of 16, 16 and 1.
  std::string text = batch_norm_job;
  text.replace(text.find("synthetic_train: 64"), 19, "synthetic_train: 66");
  auto path = write_topology("batch-norm-last", text);
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":2"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("has 1 sample"), std::string::npos) << out.text;
}

TEST_F(bad_topology, a_microbatch_of_one_for_resnet18_is_refused_at_load) {
  auto path = write_topology("batch-norm-pipeline", R"(job: pipeline
data: {dataset: synthetic, synthetic_shape: [3, 32, 32], synthetic_train: 64, synthetic_test: 32,
       batch_size: 8, microbatches: 8}
backbone: {model: resnet18, checkpoint: none, pretrain: {task: all10}}
pipeline:
  schedule: gpipe
  stages: [{last_layer: layer2_1}, {last_layer: fc2}]
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: all10, task: all10}
)");
  auto out = run_baton({"run", path});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find(path + ":3"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("batch norm"), std::string::npos) << out.text;
}
