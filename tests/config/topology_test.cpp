#include "actors/config/topology.hpp"
#include "actors/modes/job_schemas.hpp"
#include "actors/modes/registry.hpp"
#include "actors/modes/transfer/head_settings.hpp"
#include "actors/modes/transfer/section.hpp"
#include "actors/runtime/local_run.hpp"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/errc.hpp"
#include "model/core/batches.hpp"
#include "model/core/task.hpp"
#include "tests/support/scratch_dir.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using baton::actors::load_topology;
using baton::actors::parse_topology;
using baton::actors::topology;
using baton::actors::with_local_nodes;

namespace {

const std::string reference_file = std::string(BATON_SOURCE_DIR) + "/configs/transfer.yaml";

// The smallest valid topology; tests append or replace sections.
const std::string tasks_and_heads = R"(tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
  - {name: footwear, labels: [0, 0, 0, 0, 0, 1, 0, 1, 0, 1]}
heads:
  - {name: a, task: all10}
  - {name: b, task: footwear}
  - {name: c, task: all10}
)";

// What job: transfer read of `t` (its stages, heads and split).
const baton::actors::transfer::section_spec& transfer(const topology& t) {
  return baton::actors::transfer::section_of(t);
}

// The node the plan of `t` places `actor` on: placement is the plan's.
std::string node_of(const topology& t, const std::string& actor) {
  auto plan = baton::actors::plan_of(t);
  EXPECT_TRUE(plan) << baton::describe(plan.error());
  const auto* a = plan ? plan->find(actor) : nullptr;
  EXPECT_NE(a, nullptr) << actor;
  return a != nullptr ? a->node : std::string{};
}

// 1-based line of the first occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

class topology_test : public ::testing::Test {
protected:
  // Writes `text` to a file in this test's directory and returns its path.
  std::string write(const std::string& text, const std::string& name = "topology.yaml") {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  caf::expected<topology> load(const std::string& text,
                               const std::vector<std::string>& overrides = {}) {
    return load_topology(write(text), overrides);
  }

  // Expects a bad_config error whose message contains every part.
  static void expect_error(const caf::expected<topology>& result,
                           const std::vector<std::string>& parts) {
    ASSERT_FALSE(result) << "expected an error containing: " << parts.front();
    const caf::error& err = result.error();
    EXPECT_EQ(err.category(), baton::error_category_atom);
    EXPECT_EQ(err.code(), static_cast<uint8_t>(baton::errc::bad_config));
    std::string message = baton::describe(err);
    for (const auto& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
        << "message: " << message << "\nmissing: " << part;
  }

  // Loads `text` and expects an error at the line where `needle` is.
  void expect_error_at(const std::string& text, const std::string& needle,
                       std::vector<std::string> parts) {
    std::string path = (dir_ / "topology.yaml").string();
    parts.insert(parts.begin(), path + ":" + std::to_string(line_of(text, needle)) + ": ");
    expect_error(load(text), parts);
  }

  scratch_dir scratch_{"topology"};
  const fs::path dir_ = scratch_.path();
};

// -- the reference file --------------------------------------------------------

TEST_F(topology_test, reference_file_parses) {
  auto t = load_topology(reference_file);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->file, reference_file);
  EXPECT_EQ(t->job, "transfer");
  EXPECT_EQ(t->seed, 42u);
  EXPECT_EQ(t->data.kind, "fashion-mnist");
  EXPECT_EQ(t->data.path, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(t->plan.batch_size, 64);
  EXPECT_EQ(t->plan.microbatches, 2);
  EXPECT_EQ(t->plan.epochs, 1);
  EXPECT_EQ(t->plan.seed, 42u);
  EXPECT_EQ(t->backbone.name, "convnet");
  EXPECT_EQ(t->backbone.seed, baton::model::derive_seed(42, "backbone"));
  // Relative to the file's directory (configs/), not to the working directory.
  EXPECT_EQ(t->checkpoint, (fs::path(BATON_SOURCE_DIR) / "build/checkpoints/convnet-pretrained.pt")
                             .lexically_normal()
                             .string());
  ASSERT_EQ(transfer(*t).stages.size(), 3u);
  const std::vector<std::pair<size_t, size_t>> ranges = {{0, 5}, {5, 10}, {10, 16}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(transfer(*t).stages[i].name, "stage" + std::to_string(i));
    EXPECT_EQ(transfer(*t).stages[i].begin, ranges[i].first);
    EXPECT_EQ(transfer(*t).stages[i].end, ranges[i].second);
    EXPECT_EQ(transfer(*t).stages[i].node, "");
  }
  EXPECT_TRUE(t->embedded());
  EXPECT_EQ(t->source_node, "");
}

TEST_F(topology_test, reference_file_tasks_heads_and_runtime) {
  auto t = load_topology(reference_file);
  ASSERT_TRUE(t) << baton::describe(t.error());
  ASSERT_EQ(t->tasks.size(), 3u);
  ASSERT_EQ(transfer(*t).heads.size(), 3u);
  const std::vector<std::pair<std::string, int64_t>> heads = {
    {"all10", 10}, {"footwear", 2}, {"groups4", 4}};
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& spec = transfer(*t).heads[i].spec;
    EXPECT_EQ(spec.name, heads[i].first);
    EXPECT_EQ(spec.task_def.name, heads[i].first);
    EXPECT_EQ(spec.task_def.classes, heads[i].second);
    EXPECT_EQ(spec.model.name, "head");
    EXPECT_EQ(spec.model.classes, heads[i].second);
    EXPECT_EQ(spec.model.seed, baton::model::derive_seed(42, "head/" + heads[i].first));
    EXPECT_DOUBLE_EQ(spec.optimizer.lr, 0.05);
    EXPECT_DOUBLE_EQ(spec.optimizer.momentum, 0.9);
    EXPECT_EQ(transfer(*t).heads[i].node, "");
  }
  ASSERT_NE(t->find_task("footwear"), nullptr);
  EXPECT_EQ(t->find_task("footwear")->label_map[7], 1);
  EXPECT_EQ(t->find_task("nope"), nullptr);
  EXPECT_EQ(t->pretrain.task, "all10");
  EXPECT_EQ(t->pretrain.epochs, 1);
  EXPECT_EQ(t->pretrain.train_limit, 20000);
  EXPECT_EQ(t->runtime.window, 16);
  EXPECT_EQ(t->runtime.scheduler_threads, 2);
  EXPECT_EQ(t->runtime.heartbeat_interval.count(), 200);
  EXPECT_EQ(t->runtime.connection_timeout.count(), 2000);
  EXPECT_EQ(t->runtime.request_timeout.count(), 10000);
  EXPECT_EQ(t->runtime.start_timeout.count(), 300000);
  EXPECT_EQ(t->runtime.progress_every, 20);
  EXPECT_TRUE(t->runtime.shared_memory);
}

// runtime.shared_memory: local node processes pass large tensors through
// /dev/shm unless it is false; anything but a boolean is refused.
TEST_F(topology_test, shared_memory_is_a_boolean) {
  auto t = load(tasks_and_heads + "runtime: {shared_memory: false}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_FALSE(t->runtime.shared_memory);
  auto bad = load(tasks_and_heads + "runtime: {shared_memory: sometimes}\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(baton::describe(bad.error()).find("runtime.shared_memory"), std::string::npos)
    << baton::describe(bad.error());
}

TEST_F(topology_test, defaults_and_relative_paths) {
  auto t = load(tasks_and_heads + "backbone: {checkpoint: weights/ck.pt}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->checkpoint, (dir_ / "weights/ck.pt").string());
  ASSERT_EQ(transfer(*t).stages.size(), 1u); // no split: the whole backbone is one stage
  EXPECT_EQ(transfer(*t).stages[0].end, 16u);
  EXPECT_EQ(t->plan.microbatches, 1);
  EXPECT_EQ(t->runtime.window, 4);
}

TEST_F(topology_test, checkpoint_none_means_initial_weights) {
  for (const char* none : {"none", "\"\"", "~"}) {
    auto t = load(tasks_and_heads + "backbone: {checkpoint: " + none + "}\n");
    ASSERT_TRUE(t) << none << ": " << baton::describe(t.error());
    EXPECT_EQ(t->checkpoint, "") << none;
  }
  auto t = load_topology(reference_file, {"backbone.checkpoint=none"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->checkpoint, "");
}

TEST_F(topology_test, paths_without_a_file_are_relative_to_the_working_directory) {
  std::string text = tasks_and_heads + "backbone: {checkpoint: weights/ck.pt}\n";
  // A path typed in `--set` is relative to where it was typed.
  auto t = load(text, {"backbone.checkpoint=other/ck.pt"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->checkpoint, (fs::current_path() / "other/ck.pt").string());
  // parse_topology's name labels messages only: it is no directory.
  t = parse_topology(text, "<embedded configs/transfer.yaml>");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->checkpoint, (fs::current_path() / "weights/ck.pt").string());
}

// -- `--set` ------------------------------------------------------------------------

TEST_F(topology_test, set_overrides_values_and_lists) {
  auto t = load_topology(reference_file, {"data.epochs=3", "backbone.split=[pool2]",
                                          "heads.1.optimizer.lr=0.01", "runtime.window=8"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->plan.epochs, 3);
  ASSERT_EQ(transfer(*t).stages.size(), 2u);
  EXPECT_EQ(transfer(*t).stages[0].end, 10u);
  EXPECT_EQ(transfer(*t).stages[1].begin, 10u);
  EXPECT_EQ(transfer(*t).stages[1].end, 16u);
  EXPECT_DOUBLE_EQ(transfer(*t).heads[1].spec.optimizer.lr, 0.01);
  EXPECT_DOUBLE_EQ(transfer(*t).heads[0].spec.optimizer.lr, 0.05);
  EXPECT_EQ(t->runtime.window, 8);
}

TEST_F(topology_test, set_creates_sections_the_file_lacks) {
  auto t = load(tasks_and_heads, {"backbone.pretrain.optimizer.lr=0.5", "seed=7",
                                  "heads.3={name: d, task: footwear}", "nodes.0.name=n1",
                                  "nodes.0.port=7001"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].port, 7001);
  EXPECT_EQ(node_of(*t, "c"), "n1");
  EXPECT_DOUBLE_EQ(t->pretrain.optimizer.lr, 0.5);
  EXPECT_EQ(t->seed, 7u);
  EXPECT_EQ(t->plan.seed, 7u);
  ASSERT_EQ(transfer(*t).heads.size(), 4u);
  EXPECT_EQ(transfer(*t).heads[3].spec.name, "d");
}

// Issue 32 item 23: the shipped configs spelt data.kind by its older name
// data.dataset, so `--set data.kind=...` on one was refused ("give data.kind
// or data.dataset, not both"). They spell the current name, and a `--set` of
// either spelling replaces the other from the file.
TEST_F(topology_test, shipped_configs_spell_data_kind_and_take_a_set_of_it) {
  size_t with_job = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(BATON_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".yaml")
      continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_EQ(text.find("dataset:"), std::string::npos) << "the older spelling of data.kind";
    if (text.find("\njob:") == std::string::npos)
      continue; // a workload for `baton compare`: no job to parse it with
    ++with_job;
    // Synthetic samples are not images: no augmentation (configs/adamw.yaml has one).
    auto t = load_topology(entry.path().string(), {"data.kind=synthetic", "data.augment={}"});
    ASSERT_TRUE(t) << baton::describe(t.error());
    EXPECT_EQ(t->data.kind, "synthetic");
  }
  EXPECT_GE(with_job, 7u);
}

TEST_F(topology_test, a_set_of_one_spelling_replaces_the_other_in_the_file) {
  auto t = load(tasks_and_heads + "data: {dataset: fashion-mnist}\n", {"data.kind=synthetic"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->data.kind, "synthetic");
  t = load(tasks_and_heads + "data: {kind: fashion-mnist}\n", {"data.dataset=synthetic"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->data.kind, "synthetic");
  t = load(tasks_and_heads + "runtime: {stage_threads: 3}\n", {"runtime.compute_threads=2"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->runtime.compute_threads, 2);
  t = load(tasks_and_heads + "runtime: {stop_at_accuracy: 0.8}\n", {"target_accuracy=0.9"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_DOUBLE_EQ(t->target_accuracy, 0.9);
  t = load(tasks_and_heads + "target_accuracy: 0.9\n", {"runtime.stop_at_accuracy=0.7"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_DOUBLE_EQ(t->target_accuracy, 0.7);
  // Both spellings in the file itself are still refused.
  expect_error(load(tasks_and_heads + "data: {dataset: synthetic, kind: synthetic}\n",
                    {"data.epochs=2"}),
               {"give data.kind or data.dataset, not both"});
}

TEST_F(topology_test, set_unknown_key) {
  expect_error(load_topology(reference_file, {"data.epoks=3"}),
               {"--set data.epoks: unknown key 'epoks' in 'data' (expected one of: dataset, "});
  expect_error(load_topology(reference_file, {"windw=3"}),
               {"--set windw: unknown key 'windw' at the top level (expected one of: job, "});
  expect_error(load_topology(reference_file, {"data.epochs.x=3"}),
               {"--set data.epochs.x: unknown key 'x' in 'data.epochs'"});
}

TEST_F(topology_test, set_value_errors_name_the_override) {
  expect_error(load_topology(reference_file, {"data.epochs=x"}),
               {"--set data.epochs=x: 'data.epochs' must be a positive integer, got 'x'"});
  expect_error(load_topology(reference_file, {"backbone.split=[pool9]"}),
               {"--set backbone.split=[pool9]: 'backbone.split.0' names unknown layer 'pool9'"});
  expect_error(load_topology(reference_file, {"heads.0={name: z, task: nope}"}),
               {"--set heads.0={name: z, task: nope}: 'heads.0.task' names unknown task 'nope'"});
}

TEST_F(topology_test, later_overrides_win) {
  expect_error(load_topology(reference_file, {"backbone.split=[pool1, pool2]",
                                              "backbone.split.1=pool9"}),
               {"--set backbone.split.1=pool9: 'backbone.split.1' names unknown layer 'pool9'"});
  auto t = load_topology(reference_file, {"heads.0.task=nope", "heads.0={name: z, task: all10}"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(transfer(*t).heads[0].spec.name, "z");
}

TEST_F(topology_test, set_malformed) {
  expect_error(load_topology(reference_file, {"data.epochs"}),
               {"--set data.epochs: expected dotted.key=value"});
  expect_error(load_topology(reference_file, {"data.epochs=[3"}),
               {"--set data.epochs=[3: the value is not valid YAML"});
  expect_error(load_topology(reference_file, {"heads.7.name=x"}),
               {"--set heads.7.name: index 7 is past the end of 'heads' (3 entries)"});
  expect_error(load_topology(reference_file, {"heads.x.name=x"}),
               {"--set heads.x.name: 'x' is not an index of the list 'heads'"});
}

// -- errors in the file ---------------------------------------------------------------

TEST_F(topology_test, unknown_key_at_top_level) {
  std::string text = "job: transfer\nwindow: 4\n" + tasks_and_heads;
  expect_error_at(text, "window",
                  {"unknown key 'window' at the top level (expected one of: job, seed, data, "});
}

TEST_F(topology_test, unknown_key_nested) {
  std::string text = tasks_and_heads + "runtime:\n  window: 4\n  windw: 4\n";
  expect_error_at(text, "windw", {"unknown key 'windw' in 'runtime' (expected one of: window, "
                                  "scheduler_threads, compute_threads, stage_threads"});
  text = "tasks:\n  - {name: t, labels: [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]}\n"
         "heads:\n  - {name: h, task: t, optimiser: {lr: 0.1}}\n";
  expect_error_at(text, "optimiser", {"unknown key 'optimiser' in 'heads.0'"});
}

TEST_F(topology_test, duplicate_key) {
  std::string text = tasks_and_heads + "data:\n  epochs: 1\n  batch_size: 8\n  epochs: 2\n";
  expect_error_at(text, "epochs: 2", {"key 'epochs' appears twice in 'data'"});
}

TEST_F(topology_test, wrong_type) {
  std::string text = tasks_and_heads + "runtime:\n  window: four\n";
  expect_error_at(text, "four", {"'runtime.window' must be a positive integer, got 'four'"});
  text = tasks_and_heads + "runtime:\n  window: 0\n";
  expect_error_at(text, "window", {"'runtime.window' must be a positive integer, got '0'"});
  text = tasks_and_heads + "data: 5\n";
  expect_error_at(text, "data", {"'data' must be a map, got '5'"});
  text = tasks_and_heads + "data:\n  dataset: mnist\n";
  expect_error_at(text, "mnist", {"'data.dataset' must be one of: fashion-mnist, synthetic"});
}

TEST_F(topology_test, values_out_of_range) {
  std::string text = tasks_and_heads + "data: {batch_size: 8, microbatches: 9}\n";
  expect_error_at(text, "microbatches",
                  {"'data.microbatches' must be an integer from 1 to the batch size (8), got '9'"});
  text = tasks_and_heads + "nodes:\n  - {name: n1, port: 70000}\n";
  expect_error_at(text, "70000", {"'nodes.0.port' must be a port number from 1 to 65535"});
  text = tasks_and_heads + "backbone:\n  pretrain: {optimizer: {momentum: 1.5}}\n";
  expect_error_at(text, "momentum", {"'backbone.pretrain.optimizer.momentum' must be a number"});
}

// `backbone.classifier` (issue 35 item 3): a torchscript model's own choice,
// `auto` or `append`, refused for a built-in backbone and for another value.
TEST_F(topology_test, the_classifier_is_a_torchscript_backbones_choice) {
  auto t = load(tasks_and_heads);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->backbone.classifier, "auto");
  std::string text = tasks_and_heads + "backbone: {classifier: append}\n";
  expect_error_at(text, "classifier", {"backbone.model: torchscript only"});
  text = tasks_and_heads + "backbone: {classifier: replace}\n";
  expect_error_at(text, "replace", {"'backbone.classifier' must be one of: auto, append"});
}

// The workload's `optimizer:` (issue 35): every head and the pre-training
// take it, a head's own keys override it; keys of another optimizer or
// schedule and an unknown name are refused at their line; a head's schedule
// is read, and refused where the data it counts its steps from cannot be
// read.
TEST_F(topology_test, the_workload_optimizer_section) {
  auto t = load(tasks_and_heads + "optimizer: {name: adamw, lr: 0.001, betas: [0.8, 0.99], "
                                  "weight_decay: 0.01, clip_grad_norm: 2}\n",
                {"heads.1.optimizer.lr=0.01"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  ASSERT_TRUE(t->optimizer.has_value());
  EXPECT_EQ(t->pretrain.optimizer.name, "adamw");
  EXPECT_DOUBLE_EQ(t->pretrain.optimizer.beta1, 0.8);
  const auto& heads = transfer(*t).heads;
  EXPECT_EQ(heads[0].spec.optimizer.name, "adamw");
  EXPECT_DOUBLE_EQ(heads[0].spec.optimizer.lr, 0.001);
  EXPECT_DOUBLE_EQ(heads[1].spec.optimizer.lr, 0.01);
  EXPECT_DOUBLE_EQ(heads[1].spec.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(heads[1].spec.optimizer.clip_grad_norm, 2);
  std::string text = tasks_and_heads + "optimizer: {name: rmsprop}\n";
  expect_error_at(text, "rmsprop", {"'optimizer.name' must be one of: sgd, adam, adamw"});
  text = tasks_and_heads + "optimizer: {betas: [0.9, 0.99]}\n";
  expect_error_at(text, "betas", {"are adam's and adamw's"});
  text = tasks_and_heads + "optimizer: {name: adam, gamma: 0.5}\n";
  expect_error_at(text, "gamma", {"needs schedule: step"});
  text = tasks_and_heads + "optimizer: {name: adam, amsgrad: true}\n";
  expect_error_at(text, "amsgrad", {"amsgrad"});
  text = tasks_and_heads + "optimizer: {schedule: cosine, warmup_epochs: 1}\n";
  auto scheduled = load(text);
  ASSERT_TRUE(scheduled) << baton::describe(scheduled.error());
  EXPECT_EQ(transfer(*scheduled).heads[0].spec.optimizer.schedule, "cosine");
  text = "nodes: [{name: n1, port: 7001}]\ndata: {dir: /nonexistent}\n" + text;
  expect_error(load(text), {"job: transfer's heads (the workload's optimizer section is at ",
                            "step along the schedule 'cosine'",
                            "cannot read the data's headers (/nonexistent)"});
}

// A training epoch's samples (after the limit, less the validation samples)
// come with the data's headers where this process reads them, and the
// headers stay with the topology (the test split's samples for a
// prediction, the shape and classes for a launch); where a listed node
// reads the files, a schedule counts the training samples once at parse,
// and the plan takes that count (schedule_length.hpp).
TEST_F(topology_test, the_training_samples_are_read_once_with_the_data) {
  const std::string data = "data: {train_limit: 1000, test_limit: 300, validation: 0.1}\n";
  auto t = load(tasks_and_heads + data);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->training_samples, std::optional<int64_t>{900});
  ASSERT_TRUE(t->data_header);
  EXPECT_EQ(t->data_header->train, 900);
  EXPECT_EQ(t->data_header->validation, 100);
  EXPECT_EQ(t->data_header->test, 300);
  EXPECT_EQ(t->data_header->classes, 10);
  EXPECT_EQ(t->data_header->shape, (std::vector<int64_t>{1, 28, 28}));
  const std::string nodes = "nodes: [{name: n1, port: 7001}]\n";
  t = load(nodes + tasks_and_heads + data);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->training_samples, std::nullopt) << "read on the source's node";
  EXPECT_FALSE(t->data_header) << "read on the source's node";
  t = load(nodes + tasks_and_heads + data + "optimizer: {schedule: cosine}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->training_samples, std::optional<int64_t>{900});
  EXPECT_FALSE(t->data_header) << "the schedule counts the training samples only";
  auto plan = baton::actors::plan_of(*t);
  ASSERT_TRUE(plan) << baton::describe(plan.error());
  t->training_samples.reset(); // a topology the parser did not make
  plan = baton::actors::plan_of(*t);
  ASSERT_FALSE(plan);
  EXPECT_NE(baton::describe(plan.error()).find("job: transfer's heads step along a schedule "
                                               "counted from the training samples, and none "
                                               "were counted"),
            std::string::npos)
    << baton::describe(plan.error());
}

TEST_F(topology_test, missing_file) {
  std::string path = (dir_ / "absent.yaml").string();
  expect_error(load_topology(path),
               {"cannot read topology file '" + path + "': No such file or directory"});
}

TEST_F(topology_test, yaml_syntax_error) {
  // yaml-cpp notices the error where `compute_threads: 1` turns the scalar "4
  // compute_threads" into a key.
  std::string text = tasks_and_heads + "runtime:\n  window: 4\n   compute_threads: 1\n";
  expect_error_at(text, "compute_threads", {"YAML syntax error: "});
}

TEST_F(topology_test, job_not_implemented) {
  // A job the parser knows by name only (a schema without `parse`) is refused
  // by name; every job of baton's list is implemented.
  auto jobs = baton::actors::all_job_schemas();
  jobs.emplace_back().name = "future";
  auto t = parse_topology("job: future\n" + tasks_and_heads, "jobs.yaml", {}, jobs);
  ASSERT_FALSE(t);
  auto text = baton::describe(t.error());
  EXPECT_NE(text.find("jobs.yaml:1: job 'future' is not implemented yet"), std::string::npos)
    << text;
}

TEST_F(topology_test, split_unknown_layer) {
  std::string text = tasks_and_heads + "backbone:\n  split: [pool1,\n    pool9]\n";
  expect_error_at(text, "pool9", {"'backbone.split.1' names unknown layer 'pool9' (expected one "
                                  "of: conv1, relu1, conv2, relu2, pool1, conv3"});
}

TEST_F(topology_test, split_out_of_order) {
  std::string text = tasks_and_heads + "backbone:\n  split:\n    - pool2\n    - pool1\n";
  expect_error_at(text, "- pool1", {"'backbone.split.1' is 'pool1', which does not come after "
                                    "'pool2'", "conv1, relu1"});
}

TEST_F(topology_test, split_at_last_layer) {
  std::string text = tasks_and_heads + "backbone:\n  split: [relu6]\n";
  expect_error_at(text, "split", {"'backbone.split.0' is 'relu6', the last layer",
                                  "flatten, fc1)"});
}

TEST_F(topology_test, torchscript_path_must_exist) {
  std::string text = tasks_and_heads + "backbone:\n  model: torchscript\n  path: nope.pt\n";
  expect_error_at(text, "nope.pt", {"'backbone.path' names 'nope.pt'", "does not exist"});
  text = tasks_and_heads + "backbone:\n  model: torchscript\n";
  expect_error_at(text, "torchscript", {"'backbone.path' is not given"});
}

TEST_F(topology_test, torchscript_file_that_is_not_a_model) {
  write("not a zip archive", "bad.pt");
  std::string text = tasks_and_heads + "backbone:\n  model: torchscript\n  path: bad.pt\n";
  expect_error_at(text, "bad.pt", {"cannot build the backbone: "});
}

TEST_F(topology_test, heads_and_tasks) {
  std::string text = tasks_and_heads + "  - {name: d, task: groups4}\n";
  expect_error_at(text, "groups4", {"'heads.3.task' names unknown task 'groups4' (expected one "
                                    "of the tasks: all10, footwear)"});
  text = tasks_and_heads + "  - {name: b, task: all10}\n";
  expect_error_at(text, "{name: b, task: all10}", {"head 'b' is defined twice (first at "});
  text = "tasks:\n  - {name: t, labels: [0, 1]}\nheads: [{name: h, task: t}]\n";
  expect_error_at(text, "labels", {"must map the 10 classes of fashion-mnist, got 2 labels"});
  text = "tasks:\n  - {name: t, labels: [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]}\nheads: []\n";
  expect_error_at(text, "heads", {"'heads' must list at least one head"});
  expect_error_at("tasks: []\n", "tasks", {"the topology is missing the key 'heads'"});
}

// A workload without `heads:` runs under transfer with one head on its task.
TEST_F(topology_test, without_heads_one_head_trains_the_task) {
  auto t = load("tasks:\n  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
                "  - {name: footwear, labels: [0, 0, 0, 0, 0, 1, 0, 1, 0, 1]}\n"
                "task: footwear\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  const auto& heads = transfer(*t).heads;
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0].spec.name, "footwear");
  EXPECT_EQ(heads[0].spec.task_def.name, "footwear");
  EXPECT_EQ(heads[0].spec.model.classes, 2);
}

// A head's name is the directory of its checkpoints: `./all10` and `all10/`
// once shared `all10`'s, and `../../evil` wrote above checkpoint_dir.
TEST_F(topology_test, a_name_is_one_path_component_under_one_rule) {
  const std::string rule = "must be a non-empty name of at most 64 letters, digits, '.', '_' "
                           "or '-', not starting with '.' or '-'";
  const std::vector<std::pair<std::string, std::string>> bad = {
    {"./all10", "(it contains '/')"}, {"all10/", "(it contains '/')"},
    {"../../evil", "(it contains '/')"}, {"a/b", "(it contains '/')"},
    {"..", "(it starts with '.')"}, {".", "(it starts with '.')"},
    {".hidden", "(it starts with '.')"}, {"-rf", "(it starts with '-')"},
    {"a b", "(it contains ' ')"}, {"\"\"", "(it is empty)"},
    {"\"\\u00e9t\\u00e9\"", "(it contains the byte \\xc3)"}};
  for (const auto& [name, why] : bad) {
    expect_error_at(tasks_and_heads + "  - {name: " + name + ", task: all10}\n", "{name: " + name,
                    {"'heads.3.name' " + rule, why});
    expect_error_at("tasks:\n  - {name: " + name + ", labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
                      + "heads: [{name: h, task: t}]\n",
                    "{name: " + name, {"'tasks.0.name' " + rule, why});
    expect_error_at("nodes:\n  - {name: " + name + ", port: 7001}\n" + tasks_and_heads,
                    "{name: " + name, {"'nodes.0.name' " + rule, why});
  }
  // Names that differ only in case are one directory on a case-insensitive
  // file system.
  expect_error_at(tasks_and_heads + "  - {name: A, task: all10}\n", "{name: A",
                  {"head 'A' is head 'a' (at ", "in another case"});
  EXPECT_TRUE(load(tasks_and_heads + "  - {name: all10.v2_final-1, task: all10}\n"))
    << "letters, digits, '.', '_' and '-' are a name";
}

// A user name equal to one baton gives its own actors failed at run time
// ("refused a credit of microbatch 5", "unexpected_message").
TEST_F(topology_test, the_names_of_batons_own_actors_are_refused_at_load) {
  for (const std::string name :
       {"source", "stage0", "stage1.0", "Stage2", "worker.3", "shard.0", "coordinator",
        "embedded", "workers"}) {
    expect_error_at(tasks_and_heads + "  - {name: " + name + ", task: all10}\n", "{name: " + name,
                    {"head '" + name + "' has the name of one of baton's own actors or nodes"});
    expect_error_at("nodes:\n  - {name: " + name + ", port: 7001}\n" + tasks_and_heads,
                    "{name: " + name, {"node '" + name + "' has the name of one of baton's own"});
  }
  for (const std::string name : {"stages", "stage", "sources", "worker3x", "shard.a"})
    EXPECT_TRUE(load(tasks_and_heads + "  - {name: " + name + ", task: all10}\n")) << name;
}

// Issue 32 item 15: a head named `run.lock` or `run.yaml` was accepted and
// failed at its first checkpoint (its directory would be the checkpoint
// directory's own file). Refused at load, for tasks, heads and nodes.
TEST_F(topology_test, the_names_of_the_checkpoint_directorys_files_are_refused_at_load) {
  for (const std::string name : {"run.lock", "run.yaml", "RUN.YAML", "run.yaml.tmp.1.0",
                                 "run.lock.x"}) {
    expect_error_at(tasks_and_heads + "  - {name: " + name + ", task: all10}\n", "{name: " + name,
                    {"head '" + name + "' has the name of a file of the checkpoint directory "
                     "(run.lock, run.yaml, and names starting with 'run.lock.' or 'run.yaml.'"});
    expect_error_at("nodes:\n  - {name: " + name + ", port: 7001}\n" + tasks_and_heads,
                    "{name: " + name, {"node '" + name + "' has the name of a file of the "});
  }
  for (const std::string name : {"run", "run-yaml", "run.yamlx", "my.run.lock"})
    EXPECT_TRUE(load(tasks_and_heads + "  - {name: " + name + ", task: all10}\n")) << name;
}

// -- nodes and placement ------------------------------------------------------------

const std::string two_nodes = R"(nodes:
  - {name: n1, port: 7001}
  - {name: n2, host: 10.0.0.2, port: 7002}
)";

TEST_F(topology_test, placement_names_unknown_node) {
  std::string text = two_nodes + tasks_and_heads + "  - {name: d, task: all10, node: n9}\n";
  expect_error_at(text, "n9", {"'heads.3.node' names node 'n9', which is not under 'nodes' "
                               "(expected one of: n1, n2)"});
  text = two_nodes + tasks_and_heads + "backbone: {split: [pool1], place: [n1, n3]}\n";
  expect_error_at(text, "place", {"'backbone.place.1' names node 'n3'"});
  text = two_nodes + tasks_and_heads + "backbone: {split: [pool1], place: [n1]}\n";
  expect_error_at(text, "place", {"one node per stage: the backbone has 2 stages, got 1"});
}

TEST_F(topology_test, placement_without_nodes) {
  std::string text = tasks_and_heads + "data:\n  node: n1\n";
  expect_error_at(text, "node: n1",
                  {"'data.node' names node 'n1' but the topology has no nodes"});
}

TEST_F(topology_test, nodes_without_placement_are_round_robin) {
  auto t = load(two_nodes + tasks_and_heads + "backbone: {split: [pool1, pool2]}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  ASSERT_EQ(t->nodes.size(), 2u);
  EXPECT_FALSE(t->embedded());
  EXPECT_EQ(t->nodes[0].host, "127.0.0.1");
  EXPECT_EQ(t->nodes[1].host, "10.0.0.2");
  EXPECT_EQ(t->nodes[1].port, 7002);
  // stage0..2, heads a..c over n1 n2 n1 n2 ...; the source beside stage0
  EXPECT_EQ(node_of(*t, "source"), "n1");
  EXPECT_EQ(node_of(*t, "stage0"), "n1");
  EXPECT_EQ(node_of(*t, "stage1"), "n2");
  EXPECT_EQ(node_of(*t, "stage2"), "n1");
  EXPECT_EQ(node_of(*t, "a"), "n2");
  EXPECT_EQ(node_of(*t, "b"), "n1");
  EXPECT_EQ(node_of(*t, "c"), "n2");
}

TEST_F(topology_test, explicit_placement_is_kept) {
  std::string text = two_nodes + tasks_and_heads + "backbone: {split: [pool1], place: [n1, n1]}\n"
                     + "data: {node: n2}\n";
  auto t = load(text, {"heads.2.node=n2"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(node_of(*t, "source"), "n2");
  EXPECT_EQ(node_of(*t, "stage0"), "n1");
  EXPECT_EQ(node_of(*t, "stage1"), "n1");
  EXPECT_EQ(node_of(*t, "a"), "n2"); // slot 3 of n1 n2 n1 n2
  EXPECT_EQ(node_of(*t, "b"), "n1");
  EXPECT_EQ(node_of(*t, "c"), "n2");
}

TEST_F(topology_test, duplicate_nodes) {
  std::string text = two_nodes + "  - {name: n1, port: 7003}\n" + tasks_and_heads;
  expect_error_at(text, "{name: n1, port: 7003}", {"node 'n1' is defined twice"});
  text = two_nodes + "  - {name: n3, port: 7001}\n" + tasks_and_heads;
  expect_error_at(text, "{name: n3", {"address '127.0.0.1:7001' is defined twice"});
}

TEST_F(topology_test, with_local_nodes_round_robin) {
  auto t = load_topology(reference_file);
  ASSERT_TRUE(t) << baton::describe(t.error());
  topology local = with_local_nodes(*t, 3);
  ASSERT_EQ(local.nodes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(local.nodes[i].name, "n" + std::to_string(i + 1));
    EXPECT_EQ(local.nodes[i].host, "127.0.0.1");
    EXPECT_EQ(local.nodes[i].port, 0);
  }
  EXPECT_EQ(node_of(local, "source"), "n1"); // beside stage0
  EXPECT_EQ(node_of(local, "stage0"), "n1");
  EXPECT_EQ(node_of(local, "stage1"), "n2");
  EXPECT_EQ(node_of(local, "stage2"), "n3");
  EXPECT_EQ(node_of(local, "all10"), "n1");
  EXPECT_EQ(node_of(local, "footwear"), "n2");
  EXPECT_EQ(node_of(local, "groups4"), "n3");
}

TEST_F(topology_test, with_local_nodes_keeps_placements_on_its_nodes) {
  std::string text = "nodes:\n  - {name: n3, port: 7002}\n  - {name: far, port: 7009}\n"
                     + tasks_and_heads + "backbone: {split: [pool1], place: [far, n3]}\n";
  auto t = load(text);
  ASSERT_TRUE(t) << baton::describe(t.error());
  topology local = with_local_nodes(*t, 3);
  EXPECT_EQ(node_of(local, "stage0"), "n1"); // was on `far`: back to its round-robin slot
  EXPECT_EQ(node_of(local, "stage1"), "n3"); // kept, although its slot is n2
  // Not placed in the file: beside stage0, wherever that goes.
  EXPECT_EQ(node_of(local, "source"), "n1");
  EXPECT_EQ(node_of(local, "a"), "n3"); // its slot (2): n3
  topology embedded = with_local_nodes(*t, 0);
  EXPECT_TRUE(embedded.embedded());
  EXPECT_EQ(node_of(embedded, "stage1"), "");
}

// -- backbone.split: auto ----------------------------------------------------------------

// The stages are contiguous, non-empty and cover the backbone's 16 layers.
void expect_cover(const topology& t, size_t count) {
  ASSERT_EQ(transfer(t).stages.size(), count);
  size_t begin = 0;
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(transfer(t).stages[i].name, "stage" + std::to_string(i));
    EXPECT_EQ(transfer(t).stages[i].begin, begin);
    EXPECT_LT(transfer(t).stages[i].begin, transfer(t).stages[i].end);
    begin = transfer(t).stages[i].end;
  }
  EXPECT_EQ(begin, 16u);
}

TEST_F(topology_test, split_auto_plans_three_stages_by_default) {
  auto t = load(tasks_and_heads + "backbone:\n  split: auto\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_TRUE(transfer(*t).split_auto);
  expect_cover(*t, 3);
  // An explicit split is not planned.
  t = load_topology(reference_file);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_FALSE(transfer(*t).split_auto);
}

TEST_F(topology_test, split_auto_stage_count) {
  auto t = load(tasks_and_heads + "backbone: {split: auto, stages: 5}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_TRUE(transfer(*t).split_auto);
  expect_cover(*t, 5);
  // Placing the stages on nodes asks for one stage per node named.
  t = load(two_nodes + tasks_and_heads + "backbone: {split: auto, place: [n2, n1]}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  expect_cover(*t, 2);
  EXPECT_EQ(transfer(*t).stages[0].node, "n2");
  EXPECT_EQ(transfer(*t).stages[1].node, "n1");
  t = load(two_nodes + tasks_and_heads + "backbone: {split: auto, stages: 2, place: [n2, n1]}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  expect_cover(*t, 2);
  // Nodes without placement: the default count, round-robin as always.
  t = load(two_nodes + tasks_and_heads + "backbone: {split: auto}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  expect_cover(*t, 3);
  EXPECT_EQ(node_of(*t, "stage0"), "n1");
  EXPECT_EQ(node_of(*t, "source"), "n1");
}

TEST_F(topology_test, split_auto_from_set_replaces_the_list) {
  auto t = load_topology(reference_file, {"backbone.split=auto"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_TRUE(transfer(*t).split_auto);
  expect_cover(*t, 3);
  t = load_topology(reference_file, {"backbone.split=auto", "backbone.stages=16"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  expect_cover(*t, 16);
  // And back: a list replaces `auto`.
  t = load_topology(reference_file, {"backbone.split=auto", "backbone.split=[pool2]"});
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_FALSE(transfer(*t).split_auto);
  EXPECT_EQ(transfer(*t).stages.size(), 2u);
  expect_error(load_topology(reference_file, {"backbone.split=auto", "backbone.stages=0"}),
               {"--set backbone.stages=0: 'backbone.stages' must be an integer from 1 to the "
                "backbone's 16 layers, got '0'"});
}

TEST_F(topology_test, split_auto_stage_count_out_of_range) {
  for (const char* count : {"0", "17", "-1", "two"})
    expect_error_at(tasks_and_heads + "backbone:\n  split: auto\n  stages: " + count + "\n",
                    "stages:", {"'backbone.stages' must be an integer from 1 to the backbone's "
                                "16 layers, got '" + std::string(count) + "'"});
  expect_error_at(two_nodes + tasks_and_heads + "backbone:\n  split: auto\n  place: []\n",
                  "place: []", {"'backbone.place' names 0 nodes, one per stage, but split: auto "
                                "plans from 1 stage to one per layer (16)"});
}

TEST_F(topology_test, split_auto_contradictions) {
  std::string text = two_nodes + tasks_and_heads
                     + "backbone:\n  split: auto\n  stages: 3\n  place: [n1, n2]\n";
  expect_error_at(text, "stages: 3",
                  {"'backbone.stages' is 3 but 'backbone.place' (", "topology.yaml:"
                   + std::to_string(line_of(text, "place:")) + ") names 2 nodes, one per stage"});
  text = tasks_and_heads + "backbone:\n  split: [pool1]\n  stages: 2\n";
  expect_error_at(text, "stages: 2", {"'backbone.stages' applies to split: auto only"});
  text = tasks_and_heads + "backbone:\n  stages: 2\n";
  expect_error_at(text, "stages: 2", {"'backbone.stages' applies to split: auto only"});
  text = tasks_and_heads + "backbone:\n  split: automatic\n";
  expect_error_at(text, "split:", {"'backbone.split' must be a list of layer names, or auto, "
                                   "got 'automatic'"});
}

TEST_F(topology_test, split_auto_is_for_the_transfer_job_only) {
  std::string text = "job: pipeline\n" + tasks_and_heads
                     + "backbone:\n  split: auto\npipeline:\n  stages: [{last_layer: fc2}]\n";
  expect_error_at(text, "split: auto",
                  {"'backbone.split' is auto, but job: pipeline takes its stages from the "
                   "'pipeline' section (`baton profile` then `baton plan --out` writes one)"});
}

TEST_F(topology_test, backbone_replicas_copy_every_stage) {
  auto t = load(tasks_and_heads + "backbone: {split: [pool1], replicas: 2}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(transfer(*t).replicas, 2);
  EXPECT_EQ(transfer(*t).stages.size(), 2u);
  t = load(tasks_and_heads + "backbone: {split: []}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(transfer(*t).replicas, 1) << "one copy unless asked";
  for (const char* count : {"0", "17", "-1", "two"})
    expect_error_at(tasks_and_heads + "backbone:\n  replicas: " + count + "\n", "replicas:",
                    {"'backbone.replicas' must be a number of copies of the backbone from 1 to "
                     "16, got '" + std::string(count) + "'"});
  expect_error_at(tasks_and_heads + "backbone:\n  split: []\n  cache: memory\n  "
                                    "feature_block: 2\n  replicas: 2\n",
                  "replicas: 2",
                  {"'backbone.replicas' is 2, but 'backbone.cache' is memory: the cache is kept "
                   "by the one copy of the backbone"});
}

TEST_F(topology_test, backbone_replicas_placed_one_node_per_copy) {
  // A stage's place is a node (every copy there) or a list, one per copy.
  auto t = load(two_nodes + tasks_and_heads +
                "backbone: {split: [pool1], replicas: 2, place: [n1, [n2, n1]]}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(node_of(*t, "stage0.0"), "n1");
  EXPECT_EQ(node_of(*t, "stage0.1"), "n1");
  EXPECT_EQ(node_of(*t, "stage1.0"), "n2");
  EXPECT_EQ(node_of(*t, "stage1.1"), "n1");
  std::string text = two_nodes + tasks_and_heads + "backbone:\n  split: [pool1]\n  replicas: "
                     "2\n  place: [n1, [n2]]\n";
  expect_error_at(text, "place:", {"'backbone.place.1' names 1 nodes for 2 copies of the "
                                   "backbone (expected a list of 2 node names, one per copy"});
  text = two_nodes + tasks_and_heads + "backbone:\n  split: [pool1]\n  place: [n1, [n2, n1]]\n";
  expect_error_at(text, "place:", {"'backbone.place.1' is a list, but the backbone has one copy"});
  text = two_nodes + tasks_and_heads + "backbone:\n  split: [pool1]\n  replicas: 2\n  place: "
         "[n1, [n2, n3]]\n";
  expect_error_at(text, "place:", {"n3"});
}

// -- robustness -----------------------------------------------------------------------

TEST_F(topology_test, garbage_is_an_error_value_never_an_exception) {
  const std::vector<std::string> texts = {
    "", "[]", "- a\n- b\n", "just text", "job: [", "heads: 5\ntasks: []\n",
    "tasks: {a: 1}\nheads: []\n", "tasks:\n  - 5\nheads: []\n", "? [a, b]\n: c\n",
    "seed: -1\n" + tasks_and_heads, "seed: 18446744073709551616\n" + tasks_and_heads,
    "data: {epochs: 1.5}\n" + tasks_and_heads, "tasks:\n  - {name: t, labels: [-1]}\n"};
  for (const auto& text : texts) {
    caf::expected<topology> t{topology{}};
    EXPECT_NO_THROW(t = parse_topology(text, "garbage.yaml")) << text;
    expect_error(t, {"garbage.yaml"});
  }
}

// -- hostile and careless input (issue 9) ---------------------------------------------

// "[0, 0, ..., 0]" with `n` entries.
std::string flow_list(size_t n, const std::string& entry = "0") {
  std::string out = "[";
  for (size_t i = 0; i < n; ++i)
    out += (i ? ", " : "") + entry;
  return out + "]";
}

// Item 4: a 50 MB list took 9.76 GB before any reader saw it. The file is
// refused by its size, before yaml-cpp parses it.
TEST_F(topology_test, a_file_over_256_kib_is_refused_before_it_is_parsed) {
  std::string text = tasks_and_heads + "# " + std::string(256 * 1024, 'x') + "\n";
  std::string path = write(text);
  expect_error(load_topology(path),
               {"cannot read topology file '" + path + "': " + std::to_string(text.size())
                  + " bytes, more than the 262144 (256 KiB) a config file may have"});
}

// Item 4: a long list is refused by its length (before its entries are read),
// naming the key and the line.
TEST_F(topology_test, long_lists_name_the_key_the_line_and_the_limit) {
  std::string text = "tasks:\n  - {name: t, labels: " + flow_list(20000) + "}\n"
                     + "heads: [{name: h, task: t}]\n";
  expect_error_at(text, "labels",
                  {"'tasks.0.labels' must map the 10 classes of fashion-mnist, got 20000 labels"});
  text = tasks_and_heads + "backbone: {split: " + flow_list(5000, "pool1") + "}\n";
  expect_error_at(text, "split",
                  {"'backbone.split' has 5000 entries, more than the 63 allowed"});
  text = tasks_and_heads + "runtime: {tls: {certificate: " + flow_list(3000) + "}}\n";
  expect_error_at(text, "tls", {"'runtime.tls.certificate' must be a non-empty string"});
}

// Item 5: a 50 MB value was repeated whole in the error (a 52 MB log line).
TEST_F(topology_test, a_long_value_is_quoted_by_a_short_prefix) {
  const std::string value(200000, 'v');
  std::string text = "job: " + value + "\n" + tasks_and_heads;
  auto t = load(text);
  expect_error(t, {":1: 'job' must be one of: ", "got '" + std::string(48, 'v') + "...' (200000 "
                                                   "bytes)"});
  EXPECT_LT(baton::describe(t.error()).size(), 400u);
  // An unknown key and a `--set` are cut short the same way.
  t = load(tasks_and_heads + "? " + value + "\n: 1\n"); // an explicit key: no length limit
  expect_error(t, {"unknown key '" + std::string(48, 'v') + "...' (200000 bytes)"});
  EXPECT_LT(baton::describe(t.error()).size(), 400u);
  t = load(tasks_and_heads, {"job=" + value});
  expect_error(t, {"--set job=vvv", "... (200004 bytes): 'job' must be one of"});
  EXPECT_LT(baton::describe(t.error()).size(), 600u);
  // Control characters cannot forge a log line.
  expect_error(load(tasks_and_heads, {"job=\"a\\nERROR forged\""}), {"'a\\x0aERROR forged'"});
  expect_error(load(tasks_and_heads, {"job=a\nERROR forged"}), {"--set job=a\\x0aERROR"});
  // A string longer than a path is refused as such.
  expect_error_at(tasks_and_heads + "data: {dir: " + std::string(5000, 'd') + "}\n", "dir:",
                  {"'data.dir' must be a non-empty string of at most 4096 bytes, got 'ddd"});
}

// Item 6: 771k heads spawned 668 actors, then hung.
TEST_F(topology_test, per_actor_lists_are_bounded_with_the_range_in_the_error) {
  std::string heads = "heads:\n";
  for (int i = 0; i < 65; ++i)
    heads += "  - {name: h" + std::to_string(i) + ", task: t}\n";
  std::string task = "tasks:\n  - {name: t, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  expect_error_at(task + heads, "heads:",
                  {"'heads' has 65 entries, more than the 64 allowed (expected a list of heads "
                   "({name, task, node, optimizer}), at most 64)"});
  std::string tasks = "tasks:\n";
  for (int i = 0; i < 65; ++i)
    tasks += "  - {name: t" + std::to_string(i) + ", labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  expect_error_at(tasks + "heads: [{name: h, task: t0}]\n", "tasks:",
                  {"'tasks' has 65 entries, more than the 64 allowed"});
  std::string nodes = "nodes:\n";
  for (int i = 0; i < 257; ++i)
    nodes += "  - {name: n" + std::to_string(i) + ", port: " + std::to_string(7000 + i) + "}\n";
  expect_error_at(nodes + tasks_and_heads, "nodes:",
                  {"'nodes' has 257 entries, more than the 256 allowed"});
  std::string faults = "faults:\n";
  for (int i = 0; i < 65; ++i)
    faults += "  - {kind: throw, actor: a, at_step: 1}\n";
  expect_error_at(tasks_and_heads + faults, "faults:",
                  {"'faults' has 65 entries, more than the 64 allowed"});
  // A name is at most 64 bytes: names are listed in errors and logs.
  expect_error_at(tasks_and_heads + "  - {name: " + std::string(65, 'n') + ", task: all10}\n",
                  std::string(65, 'n'),
                  {"'heads.3.name' must be a non-empty name of at most 64 letters, digits, "
                   "'.', '_' or '-', not starting with '.' or '-', got '",
                   "(it is 65 bytes long)"});
}

TEST_F(topology_test, pipeline_replicas_and_stage_actors_are_bounded) {
  const std::string pipeline = "job: pipeline\n" + tasks_and_heads + "pipeline:\n  stages:\n";
  expect_error_at(pipeline + "    - {last_layer: fc2, replicas: 1000000}\n", "replicas",
                  {"'pipeline.stages.0.replicas' must be a number of replicas from 1 to 64, got "
                   "'1000000'"});
  std::string stages = pipeline;
  for (const char* layer : {"conv1", "conv2", "pool1", "conv3", "conv4"})
    stages += "    - {last_layer: " + std::string{layer} + ", replicas: 64}\n";
  stages += "    - {last_layer: fc2}\n";
  expect_error_at(stages, "conv4", {"'pipeline.stages' asks for more than 256 stage actors, "
                                    "replicas counted"});
}

// weight_gradient: next moves a convolution's weight gradient to the next
// stage: refused on another layer, on the last stage, and as another word.
TEST_F(topology_test, a_weight_gradient_moves_from_a_convolution_to_a_next_stage) {
  const std::string pipeline = "job: pipeline\n" + tasks_and_heads + "pipeline:\n  stages:\n";
  auto t = load(pipeline + "    - {last_layer: conv3, weight_gradient: next}\n"
                           "    - {last_layer: fc2, weight_gradient: here}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  expect_error_at(pipeline + "    - {last_layer: relu3, weight_gradient: next}\n"
                             "    - {last_layer: fc2}\n",
                  "next", {"'pipeline.stages.0.weight_gradient' is next, but 'relu3' is not a "
                           "convolution"});
  expect_error_at(pipeline + "    - {last_layer: conv3}\n"
                             "    - {last_layer: fc2, weight_gradient: next}\n",
                  "next", {"'pipeline.stages.1.weight_gradient' is next, but the last stage "
                           "has no next stage"});
  expect_error_at(pipeline + "    - {last_layer: conv3, weight_gradient: later}\n"
                             "    - {last_layer: fc2}\n",
                  "later", {"'pipeline.stages.0.weight_gradient' is 'later' (expected here"});
}

// Bounded memory: a synthetic split is made in memory (it was a bad_alloc).
TEST_F(topology_test, a_synthetic_split_is_at_most_4_gib) {
  expect_error_at("data:\n  dataset: synthetic\n  synthetic_train: 1000000000000\n"
                    + tasks_and_heads,
                  "synthetic_train", {"data.synthetic_train asks for 1000000000000 samples of 784 "
                                      "values, more than 2^30 values (4 GiB) in all (expected at "
                                      "most 1369568 samples)"});
  expect_error_at("data:\n  dataset: synthetic\n  synthetic_shape: [1, 4096, 4096]\n"
                    + tasks_and_heads,
                  "synthetic_shape", {"data.synthetic_train asks for 4096 samples"});
}

// Item 8 (the devices and FIFOs, which read without end or block, are run
// bounded in bad_topology_test): only a regular file is read.
TEST_F(topology_test, a_directory_is_not_a_topology) {
  expect_error(load_topology(dir_.string()), {"not a regular file (a directory)"});
}

// Issue 22: the target accuracy is the workload's (`target_accuracy`); files
// that give it as runtime.stop_at_accuracy keep working; not both.
TEST_F(topology_test, target_accuracy_is_the_workloads) {
  auto t = load(tasks_and_heads + "target_accuracy: 0.85\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_DOUBLE_EQ(t->target_accuracy, 0.85);
  auto older = load(tasks_and_heads + "runtime: {stop_at_accuracy: 0.8}\n");
  ASSERT_TRUE(older) << baton::describe(older.error());
  EXPECT_DOUBLE_EQ(older->target_accuracy, 0.8);
  expect_error_at(tasks_and_heads + "target_accuracy: 0.85\nruntime: {stop_at_accuracy: 0.8}\n",
                  "runtime:", {"give target_accuracy or runtime.stop_at_accuracy, not both"});
  expect_error_at(tasks_and_heads + "target_accuracy: 85\n", "target_accuracy",
                  {"'target_accuracy' must be a test accuracy in (0, 1] (0.85 for 85%)"});
}

// Item 9: scheduler_threads=100000 aborted; stage_threads=100000 made
// threads until the process could make no more.
TEST_F(topology_test, thread_counts_have_a_range) {
  expect_error_at(tasks_and_heads + "runtime: {scheduler_threads: 100000}\n", "scheduler",
                  {"'runtime.scheduler_threads' must be a number of threads from 1 to 64, got "
                   "'100000'"});
  expect_error_at(tasks_and_heads + "runtime: {compute_threads: 100000}\n", "compute_threads",
                  {"'runtime.compute_threads' must be a number of threads per actor from 1 to "
                   "256, got '100000'"});
  expect_error_at(tasks_and_heads + "runtime: {stage_threads: 100000}\n", "stage_threads",
                  {"'runtime.stage_threads' must be a number of threads per actor from 1 to "
                   "256, got '100000'"});
  expect_error_at(tasks_and_heads + "runtime: {head_threads: 257}\n", "head_threads",
                  {"'runtime.head_threads' must be a number of threads per actor from 1 to 256"});
  auto t = load(tasks_and_heads + "runtime: {scheduler_threads: 64, compute_threads: 256}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->runtime.compute_threads, 256);
  // The credit window: messages of up to 64 MiB that a receiver may hold.
  expect_error_at(tasks_and_heads + "runtime: {window: 100000}\n", "window",
                  {"'runtime.window' must be a positive integer at most 256"});
}

// `runtime.compute_threads` is the budget of every actor that computes;
// `stage_threads`, its older name, is still read, but not beside it.
TEST_F(topology_test, stage_threads_is_the_older_name_of_compute_threads) {
  auto t = load(tasks_and_heads + "runtime: {stage_threads: 3}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(t->runtime.compute_threads, 3);
  EXPECT_TRUE(t->runtime.compute_threads_asked);
  t = load(tasks_and_heads);
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_FALSE(t->runtime.compute_threads_asked);
  expect_error_at(tasks_and_heads + "runtime:\n  compute_threads: 2\n  stage_threads: 2\n",
                  "stage_threads",
                  {"give runtime.compute_threads or runtime.stage_threads, not both "
                   "(runtime.stage_threads is its older name)"});
}

// `runtime.head_threads` is job: transfer's: its heads' budget, which
// another job refuses by name.
TEST_F(topology_test, head_threads_is_transfers_own) {
  const std::string task = "task: all10\ntasks:\n  - {name: all10, labels: "
                           "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  expect_error_at("job: pipeline\n" + task + "runtime: {head_threads: 2}\n", "head_threads",
                  {"'runtime.head_threads' is read only by jobs that run the backbone frozen "
                   "(job: transfer); job: pipeline does not"});
  auto t = load(tasks_and_heads + "runtime: {compute_threads: 1, head_threads: 3}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  EXPECT_EQ(transfer(*t).head_threads, 3);
  auto plan = baton::actors::plan_of(*t);
  ASSERT_TRUE(plan) << baton::describe(plan.error());
  for (const auto& a : plan->actors)
    if (a.role != "source")
      EXPECT_EQ(a.threads, a.role == "head" ? 3 : 1) << a.name;
  auto head = baton::actors::transfer::parse_head_settings(plan->find("a")->settings);
  ASSERT_TRUE(head) << baton::describe(head.error());
  EXPECT_EQ(head->threads, 3) << "the head actor's own settings";
  EXPECT_EQ(plan->threads_asked_by, "runtime.compute_threads, runtime.head_threads");
  // Unset, the heads take the common budget.
  t = load(tasks_and_heads + "runtime: {compute_threads: 2}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  plan = baton::actors::plan_of(*t);
  ASSERT_TRUE(plan) << baton::describe(plan.error());
  EXPECT_EQ(plan->find("a")->threads, 2);
  EXPECT_EQ(plan->threads_asked_by, "runtime.compute_threads");
}

// Issue 36: the budgets a topology leaves unset are a step over its one
// plan: each computing actor whose budget was not asked gets the machine's
// share over the plan's computing actors, in the plan and in its settings;
// an asked budget (runtime.head_threads) stays.
TEST_F(topology_test, unasked_budgets_are_set_over_the_one_plan) {
  auto t = load(tasks_and_heads + "runtime: {head_threads: 3}\n");
  ASSERT_TRUE(t) << baton::describe(t.error());
  auto plan = baton::actors::plan_of(*t);
  ASSERT_TRUE(plan) << baton::describe(plan.error());
  int32_t computing = 0;
  for (const auto& a : plan->actors)
    computing += a.threads > 0 ? 1 : 0;
  const int32_t share = std::max<int32_t>(1, baton::actors::cores() / computing);
  for (const auto& a : plan->actors)
    if (a.role == "stage")
      EXPECT_EQ(a.threads, share) << a.name;
  const auto* head = plan->find("a");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->threads, 3);
  EXPECT_TRUE(head->threads_asked);
  auto settings = baton::actors::transfer::parse_head_settings(head->settings);
  ASSERT_TRUE(settings) << baton::describe(settings.error());
  EXPECT_EQ(settings->threads, 3);
}

// Item 10: label 99 made a 100-way head, 1e8 a 51 GB allocation.
TEST_F(topology_test, task_classes_are_bounded_by_the_dataset_classes) {
  expect_error_at("tasks:\n  - {name: t, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8,\n    99]}\n"
                  "heads: [{name: h, task: t}]\n",
                  "99", {"'tasks.0.labels.9' must be a task class from 0 to 9 (fashion-mnist "
                         "has 10 classes; a task has at most as many), got '99'"});
  expect_error_at("tasks:\n  - {name: t, labels: [100000000, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
                  "heads: [{name: h, task: t}]\n",
                  "labels", {"'tasks.0.labels.0' must be a task class from 0 to 9"});
  // A synthetic set has its own classes (10), and a map must cover them.
  const std::string synthetic = "data: {dataset: synthetic}\n";
  expect_error_at(synthetic + "tasks:\n  - {name: t, labels: [0, 1, 2]}\n"
                  "heads: [{name: h, task: t}]\n",
                  "labels", {"'tasks.0.labels' must map the 10 classes of synthetic, got 3"});
  EXPECT_THROW(baton::model::make_task("t", {0, 1, 3}), std::exception)
    << "a map over 3 dataset classes names task class 3";
}

// Item 11: a missing dataset directory failed only once actors were spawned.
TEST_F(topology_test, a_missing_dataset_is_refused_at_load_when_read_here) {
  std::string text = tasks_and_heads + "data:\n  dir: " + (dir_ / "nowhere").string() + "\n";
  expect_error_at(text, "dir:", {"cannot read the dataset fashion-mnist in '"
                                 + (dir_ / "nowhere").string() + "' (data.dir): ",
                                 "train-images-idx3-ubyte.gz: cannot open: No such file"});
  // On listed nodes the data is the source node's to read: not checked here.
  auto t = load("nodes: [{name: n1, port: 7001}]\n" + text);
  EXPECT_TRUE(t) << baton::describe(t.error());
}

// Item 19: a fault past the job's end was accepted and never fired.
TEST_F(topology_test, a_fault_at_a_step_the_job_never_reaches_is_refused) {
  const std::string synthetic =
    "data: {dataset: synthetic, synthetic_train: 100, batch_size: 16, epochs: 2}\n";
  // 2 epochs x 7 minibatches (the last one of 4 samples): steps 0 to 13.
  auto t = load(synthetic + tasks_and_heads + "faults: [{kind: throw, actor: a, at_step: 13}]\n");
  EXPECT_TRUE(t) << baton::describe(t.error());
  expect_error_at(synthetic + tasks_and_heads
                    + "faults:\n  - {kind: kill_node, node: n2,\n     at_step: 14}\n",
                  "at_step", {"'faults.0.at_step' is 14, but the job has 14 steps (2 epochs x 7 "
                              "minibatches of 16 from 100 training samples), so the fault would "
                              "never fire (expected a step from 0 to 13)"});
  // Fashion-MNIST read here: 60000 samples, or the limit.
  expect_error_at(tasks_and_heads + "data: {train_limit: 640}\n"
                    + "faults: [{kind: throw, actor: a, at_step: 10}]\n",
                  "faults", {"the job has 10 steps (1 epoch x 10 minibatches of 64 from 640 "
                             "training samples)"});
  expect_error_at(tasks_and_heads + "faults: [{kind: throw, actor: a, at_step: 100000}]\n",
                  "faults", {"the job has 938 steps (1 epoch x 938 minibatches of 64 from 60000 "
                             "training samples)"});
  // From `--fault` (a --set), the error names it.
  expect_error(load(synthetic + tasks_and_heads,
                    {"faults.+={kind: drop, from: source, to: stage0, at_step: 99}"}),
               {"--set faults.+={kind: drop, from: source, to: stage0, at_step: 99}: "
                "'faults.0.at_step' is 99, but the job has 14 steps"});
}

} // namespace
