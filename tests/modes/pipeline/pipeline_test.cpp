// Pipeline-parallel training end to end: real `baton` processes, real
// Fashion-MNIST, trainable stages as actors, checked against the local loop.

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/pretrain.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

class pipeline : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("pipeline"); }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::vector<std::string> job(const std::string& schedule) {
    return {"run",   source_path("configs/pipeline.yaml"),
            "--set", "data.train_limit=1024",
            "--set", "data.test_limit=256",
            "--set", "pipeline.schedule=" + schedule};
  }

  /// Three stages, the first two of two replicas each (4 microbatches of
  /// 512 samples), whose last convolution's weight gradient is computed
  /// `where` (weight_gradient: here or next).
  static std::vector<std::string> replicated_stages(const std::string& where) {
    return {"--set", "data.microbatches=4", "--set", "data.train_limit=512", "--set",
            "pipeline.stages=[{last_layer: conv2, replicas: 2, weight_gradient: " + where +
              "}, {last_layer: conv4, replicas: 2, weight_gradient: " + where +
              "}, {last_layer: fc2}]"};
  }

  /// Every parameter of a checkpoint of the pipeline's model (convnet + fc2).
  static std::vector<torch::Tensor> saved_parameters(const std::string& path) {
    baton::model::model_spec convnet;
    convnet.name = "convnet";
    auto whole = baton::model::make_pretrain_model(convnet, 10);
    baton::model::load_checkpoint(whole, path);
    return whole.parameters();
  }

  /// Largest difference between the parameters of two checkpoints.
  static double max_difference(const std::string& a, const std::string& b) {
    auto x = saved_parameters(a);
    auto y = saved_parameters(b);
    EXPECT_EQ(x.size(), y.size());
    double worst = 0;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      worst = std::max(worst, (x[i] - y[i]).abs().max().item<double>());
    return worst;
  }

  /// The events of a --trace file, by actor (thread) name.
  static std::map<std::string, std::vector<nlohmann::json>> trace_by_actor(const std::string& path) {
    auto trace = read_json(path);
    std::map<int64_t, std::string> names; // tid -> actor
    for (const auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "M" && e.at("name") == "thread_name")
        names[e.at("tid").get<int64_t>()] = e.at("args").at("name").get<std::string>();
    std::map<std::string, std::vector<nlohmann::json>> out;
    for (const auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "X")
        out[names.at(e.at("tid").get<int64_t>())].push_back(e);
    return out;
  }

  /// microbatch id -> weight version of its `kind` slices at one actor.
  static std::map<int64_t, int64_t> versions(const std::vector<nlohmann::json>& events,
                                             const std::string& kind) {
    std::map<int64_t, int64_t> out;
    for (const auto& e : events)
      if (e.at("name") == kind)
        out[e.at("args").at("microbatch").get<int64_t>()] =
          e.at("args").at("version").get<int64_t>();
    return out;
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// DESIGN invariant 2: synchronous schedules over 3 stage actors end with the
// weights of the local run with gradient accumulation over the same
// microbatches, here bit for bit (same thread budget, same order of sums).
TEST_F(pipeline, synchronous_schedules_equal_the_local_run) {
  const auto& local = shared_run(*dir_, with(job("gpipe"), {"--mode", "local"}), "local");
  ASSERT_EQ(digests_by_actor(local, "pipeline_stage").size(), 3u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, job("gpipe"), "gpipe"), "pipeline_stage"),
            digests_by_actor(local, "pipeline_stage"));
  EXPECT_EQ(digests_by_actor(shared_run(*dir_, job("1f1b-flush"), "flush"), "pipeline_stage"),
            digests_by_actor(local, "pipeline_stage"));
}

// AdamW (the workload's optimizer section; each stage holds the moments of
// its own layers and steps out of place for weight stashing): the actors
// still end with the local run's weights, bit for bit, synchronous and
// static 1F1B alike.
TEST_F(pipeline, adamw_equals_the_local_run) {
  std::ifstream in(source_path("configs/pipeline.yaml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sgd = "optimizer: {lr: 0.0125, momentum: 0.9}";
  ASSERT_NE(text.find(sgd), std::string::npos);
  text.replace(text.find(sgd), sgd.size(), "optimizer: {name: adamw, lr: 0.001, weight_decay: 0.01}");
  const std::string file = dir_->path() + "/pipeline-adamw.yaml";
  std::ofstream(file) << text;
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    auto adamw = job(schedule);
    adamw[1] = file;
    auto local = run_job(*dir_, with(adamw, {"--mode", "local"}), "adamw-local-" + schedule);
    auto reference = digests_by_actor(local, "pipeline_stage");
    ASSERT_EQ(reference.size(), 3u);
    EXPECT_EQ(digests_by_actor(run_job(*dir_, adamw, "adamw-" + schedule), "pipeline_stage"),
              reference)
      << schedule;
    // AdamW is not the shipped SGD: the test can fail.
    EXPECT_NE(digests_by_actor(shared_run(*dir_, with(job(schedule), {"--mode", "local"}),
                                          "sgd-local-" + schedule),
                               "pipeline_stage"),
              reference)
      << schedule;
  }
}

// A learning-rate schedule (cosine after half an epoch's warm-up): every
// stage counts its steps from the training samples the plan read (a
// minibatch's under gpipe, a microbatch's under 1f1b: 2 a minibatch here),
// as the local run counts its trainers', and the actors end with the local
// run's weights, bit for bit, embedded and over node processes. Until
// 2026-12-06 job: pipeline refused every schedule.
TEST_F(pipeline, a_learning_rate_schedule_equals_the_local_run) {
  const std::vector<std::string> shorter{"--set", "data.train_limit=512", "--set",
                                         "data.epochs=2", "--set", "data.microbatches=2"};
  const std::vector<std::string> cosine{
    "--set", "backbone.pretrain.optimizer.schedule=cosine", "--set",
    "backbone.pretrain.optimizer.warmup_epochs=0.5"};
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    const auto scheduled = with(with(job(schedule), shorter), cosine);
    auto reference = digests_by_actor(
      run_job(*dir_, with(scheduled, {"--mode", "local"}), "cosine-local-" + schedule),
      "pipeline_stage");
    ASSERT_EQ(reference.size(), 3u);
    EXPECT_EQ(digests_by_actor(run_job(*dir_, scheduled, "cosine-" + schedule),
                               "pipeline_stage"),
              reference)
      << schedule;
    if (schedule == "1f1b")
      EXPECT_EQ(digests_by_actor(run_job(*dir_, with(scheduled, {"--local-nodes", "2"}),
                                         "cosine-nodes-" + schedule),
                                 "pipeline_stage"),
                reference)
        << schedule;
    // The schedule changes the weights: the test can fail.
    EXPECT_NE(digests_by_actor(run_job(*dir_, with(with(job(schedule), shorter),
                                                   {"--mode", "local"}),
                                       "constant-local-" + schedule),
                               "pipeline_stage"),
              reference)
      << schedule;
  }
}

// data.validation and data.augment (issue 35): the source holds out the
// validation samples as --mode local does, augments each training sample
// as it does, and sends the validation samples after the test split's; the
// last stage evaluates them. The actors end with the local run's weights,
// the same accuracies each epoch, and --save-model writes the same best
// epoch's weights (save: best, kept by the coordinator from the stages'
// per-epoch weights).
TEST_F(pipeline, validation_augmentation_and_the_best_epoch_equal_the_local_run) {
  const auto augmented = with(job("gpipe"), {"--set", "data.train_limit=384", "--set",
                                             "data.test_limit=128", "--set", "data.epochs=3",
                                             "--set", "data.validation=0.25", "--set",
                                             "data.augment={crop: 2, flip: true}"});
  const auto runs = run_both_saving(*dir_, augmented, "best");
  auto reference = digests_by_actor(runs.local, "pipeline_stage");
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_EQ(digests_by_actor(runs.actors, "pipeline_stage"), reference);
  expect_same_best_epoch(runs.actors, runs.local, 3);
  EXPECT_EQ(max_difference(runs.actors_model, runs.local_model), 0.0);
  // The saved model is its best epoch's: not the final weights unless the
  // last epoch was the best.
  const auto last = dir_->path() + "/last.pt";
  run_job(*dir_, with(augmented, {"--mode", "local", "--save-model", last, "--set", "save=last"}),
          "last-local");
  if (runs.actors.at("heads")[0].at("best_epoch") != 3)
    EXPECT_GT(max_difference(last, runs.local_model), 0.0);
  // And the augmentation changes the weights: the test can fail.
  EXPECT_NE(digests_by_actor(run_job(*dir_,
                                     with(augmented, {"--mode", "local", "--set",
                                                      "data.augment={crop: 0, flip: false}"}),
                                     "plain-local"),
                             "pipeline_stage"),
            reference);
}

// DESIGN invariants 2 and 7: the same over 3 node processes.
TEST_F(pipeline, synchronous_schedule_over_node_processes_equals_the_local_run) {
  auto local = run_job(*dir_, with(job("1f1b-flush"), {"--mode", "local"}), "local-flush");
  auto nodes = run_job(*dir_, with(job("1f1b-flush"), {"--local-nodes", "3"}), "nodes");
  EXPECT_EQ(digests_by_actor(nodes, "pipeline_stage"), digests_by_actor(local, "pipeline_stage"));
  EXPECT_EQ(nodes.at("nodes").size(), 4u);
}

// Asynchronous 1F1B trains every sample once and really is asynchronous: its
// weights differ from the synchronous run's (stale weights by design; that
// each backward uses its forward's version is stage_trainer_test's job).
TEST_F(pipeline, asynchronous_1f1b_trains_every_sample) {
  auto async = run_job(*dir_, job("1f1b"), "async");
  const auto& flush = shared_run(*dir_, job("1f1b-flush"), "flush");
  ASSERT_EQ(async.at("heads").size(), 1u);
  EXPECT_EQ(async.at("heads")[0].at("samples").get<int64_t>(), 1024);
  EXPECT_LT(async.at("heads")[0].at("train_loss").get<double>(), 2.31); // ln 10 = 2.303
  EXPECT_NE(digests_by_actor(async, "pipeline_stage"), digests_by_actor(flush, "pipeline_stage"));
}

// Issue 21, item 15: 1f1b follows PipeDream's static 1F1B order (warm-up
// forwards up to the NOAM, then one forward after each backward, then the
// cool-down backwards), so its weights are a function of the schedule alone:
// the same as the one-thread simulation of that order (`--mode local`), with
// credit windows 1 and 2, run after run, embedded and over 3 node processes.
// The forward of microbatch k at stage i (NOAM 3 - i) used version
// max(0, k - NOAM + 1): the order is PipeDream's, not just some fixed order.
TEST_F(pipeline, static_1f1b_is_repeatable_and_equals_its_local_simulation) {
  const auto& local = shared_run(*dir_, with(job("1f1b"), {"--mode", "local"}), "local-static");
  auto reference = digests_by_actor(local, "pipeline_stage");
  ASSERT_EQ(reference.size(), 3u);
  auto trace = dir_->path() + "/static.trace.json";
  auto first = run_job(*dir_, with(job("1f1b"), {"--trace", trace}), "static-1");
  EXPECT_EQ(digests_by_actor(first, "pipeline_stage"), reference);
  auto again = run_job(*dir_, with(job("1f1b"), {"--set", "runtime.window=2"}), "static-2");
  EXPECT_EQ(digests_by_actor(again, "pipeline_stage"), reference);
  auto nodes = run_job(*dir_, with(job("1f1b"), {"--local-nodes", "3"}), "static-nodes");
  EXPECT_EQ(digests_by_actor(nodes, "pipeline_stage"), reference);
  EXPECT_EQ(first.at("heads")[0].at("test_accuracy"), local.at("heads")[0].at("test_accuracy"));
  auto actors = trace_by_actor(trace);
  for (int64_t i = 0; i < 3; ++i) {
    auto forward = versions(actors.at("stage" + std::to_string(i)), "forward");
    ASSERT_EQ(forward.size(), 1024u / 64) << "stage" << i;
    for (auto [id, version] : forward)
      EXPECT_EQ(version, std::max<int64_t>(0, id - (3 - i) + 1)) << "stage" << i << " mb " << id;
  }
}

// weight_gradient: next (each convolution ending a stage has its weight
// gradient computed by the next stage, its input crossing beside its output)
// moves work, not arithmetic: static 1F1B ends with the weights of its local
// simulation, embedded and over node processes (the tensors on the wire),
// and gpipe its own.
TEST_F(pipeline, a_weight_gradient_computed_by_the_next_stage_changes_no_weight) {
  const std::vector<std::string> stages{
    "--set", "pipeline.stages=[{last_layer: conv2, weight_gradient: next}, "
             "{last_layer: conv4, weight_gradient: next}, {last_layer: fc2}]"};
  auto local = run_job(*dir_, with(with(job("1f1b"), stages), {"--mode", "local"}),
                       "next-local");
  auto reference = digests_by_actor(local, "pipeline_stage");
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(job("1f1b"), stages), "next-embedded"),
                             "pipeline_stage"),
            reference);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(with(job("1f1b"), stages),
                                                  {"--local-nodes", "3"}),
                                     "next-nodes"),
                             "pipeline_stage"),
            reference);
  // gpipe: a step per minibatch, after every weight half of it is in.
  auto gpipe = digests_by_actor(
    run_job(*dir_, with(with(job("gpipe"), stages), {"--mode", "local"}), "next-gpipe-local"),
    "pipeline_stage");
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(job("gpipe"), stages), "next-gpipe"),
                             "pipeline_stage"),
            gpipe);
}

// The weight half goes back in a message of its own after the input
// gradient, and a stage steps (or adds to its replica group's sum) only once
// it is in, in the order of its backwards: with a replicated stage handing
// it on to a replicated one (whose replicas send in any order), static 1f1b
// (embedded and over node processes) and gpipe (the test below) end with
// the weights of the same stages without it. A group step that comes while
// a replica's last backward waits for its half leaves that backward's
// gradients (stage_trainer_test has the order this run meets now and then).
TEST_F(pipeline, a_weight_gradient_handed_on_between_replicas_changes_no_weight) {
  auto here = digests_by_actor(
    run_job(*dir_, with(job("1f1b"), replicated_stages("here")), "replicas-here"),
    "pipeline_stage");
  ASSERT_EQ(here.size(), 5u);
  EXPECT_EQ(here.at("stage0.0"), here.at("stage0.1"));
  EXPECT_EQ(digests_by_actor(
              run_job(*dir_, with(job("1f1b"), replicated_stages("next")), "replicas-next"),
              "pipeline_stage"),
            here);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(with(job("1f1b"), replicated_stages("next")),
                                                  {"--local-nodes", "3"}),
                                     "replicas-next-nodes"),
                             "pipeline_stage"),
            here);
  // gpipe: replicated_flush_schedules_are_repeatable below.
}

// The same with replicated stages: stage 1 takes the microbatches of stage
// 0's two replicas in the source's order, whichever replica is faster, and a
// replica takes no forward between its contribution to a group step and that
// step: the same weights run after run, with credit windows 1 and 2,
// embedded and over node processes.
TEST_F(pipeline, replicated_static_1f1b_is_repeatable) {
  const std::vector<std::string> replicated{
    "--set", "data.microbatches=4",           "--set", "data.train_limit=512",
    "--set", "pipeline.stages.0.replicas=2", "--set", "pipeline.stages.2.replicas=2"};
  auto first = run_job(*dir_, with(job("1f1b"), replicated), "replicated-static-1");
  auto reference = digests_by_actor(first, "pipeline_stage");
  ASSERT_EQ(reference.size(), 5u);
  EXPECT_EQ(reference.at("stage0.0"), reference.at("stage0.1"));
  EXPECT_EQ(reference.at("stage2.0"), reference.at("stage2.1"));
  EXPECT_EQ(first.at("heads")[0].at("samples").get<int64_t>(), 512);
  auto again = run_job(*dir_, with(with(job("1f1b"), replicated), {"--set", "runtime.window=2"}),
                       "replicated-static-2");
  EXPECT_EQ(digests_by_actor(again, "pipeline_stage"), reference);
  auto nodes = run_job(*dir_, with(with(job("1f1b"), replicated), {"--local-nodes", "3"}),
                       "replicated-static-nodes");
  EXPECT_EQ(digests_by_actor(nodes, "pipeline_stage"), reference);
}

// The flush schedules with replicated stages: a stage after replicas takes
// their microbatches in the source's order, a stage takes its backwards in
// forward order whichever receiver replica answered first, so a replica's
// step adds its microbatches' gradients in one order: the same weights run
// after run (until 2026-12-06 they were added as they came: three runs of
// gpipe gave three digests), with credit windows 1 and 2, embedded and over
// node processes.
TEST_F(pipeline, replicated_flush_schedules_are_repeatable) {
  const auto replicated = replicated_stages("here");
  for (const std::string schedule : {"gpipe", "1f1b-flush"}) {
    auto first = digests_by_actor(run_job(*dir_, with(job(schedule), replicated),
                                          "replicated-" + schedule + "-1"),
                                  "pipeline_stage");
    ASSERT_EQ(first.size(), 5u);
    EXPECT_EQ(first.at("stage0.0"), first.at("stage0.1"));
    EXPECT_EQ(first.at("stage1.0"), first.at("stage1.1"));
    auto again = with(with(job(schedule), replicated), {"--set", "runtime.window=2"});
    EXPECT_EQ(digests_by_actor(run_job(*dir_, again, "replicated-" + schedule + "-2"),
                               "pipeline_stage"),
              first)
      << schedule;
    if (schedule != "gpipe")
      continue;
    EXPECT_EQ(digests_by_actor(run_job(*dir_, with(with(job(schedule), replicated),
                                                    {"--local-nodes", "3"}),
                                       "replicated-gpipe-nodes"),
                               "pipeline_stage"),
              first);
    // The stages handing on their last weight gradient to each other
    // (a_weight_gradient_handed_on_between_replicas_changes_no_weight).
    EXPECT_EQ(digests_by_actor(run_job(*dir_, with(job(schedule), replicated_stages("next")),
                                       "replicated-gpipe-next"),
                               "pipeline_stage"),
              first);
  }
}

// The dynamic order stays an option (`pipeline.schedule: 1f1b-dynamic`):
// it trains every sample once, with stale weights as 1f1b does.
TEST_F(pipeline, dynamic_1f1b_trains_every_sample) {
  auto dynamic = run_job(*dir_, job("1f1b-dynamic"), "dynamic");
  ASSERT_EQ(dynamic.at("heads").size(), 1u);
  EXPECT_EQ(dynamic.at("heads")[0].at("samples").get<int64_t>(), 1024);
  EXPECT_LT(dynamic.at("heads")[0].at("train_loss").get<double>(), 2.31);
}

// Issue 22: a workload with no `pipeline` section runs under job: pipeline
// with the planner's stages for its cluster (profiled at its batch), which
// the run logs; its static 1f1b over 2 node processes equals the local
// simulation of the stages it chose, bit for bit.
TEST_F(pipeline, a_workload_without_stages_runs_with_the_planners) {
  const auto workload = dir_->path() + "/workload.yaml";
  std::ofstream(workload) << R"(seed: 42
data:
  kind: fashion-mnist
  dir: /usr/share/datasets/fashion-mnist
  train_limit: 512
  test_limit: 200
  batch_size: 64
  microbatches: 2
backbone: {model: convnet, checkpoint: none}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
task: all10
)";
  const auto metrics = dir_->path() + "/auto-nodes.json";
  const auto model = dir_->path() + "/auto-nodes.pt", local_model = dir_->path() + "/auto.pt";
  auto run = run_baton({"run", workload, "--set", "job=pipeline", "--local-nodes", "2",
                        "--metrics-out", metrics, "--save-model", model});
  ASSERT_EQ(run.exit_code, 0) << run.text;
  const std::string logged = "pipeline: stages from the planner: ";
  const auto at = run.text.find(logged);
  ASSERT_NE(at, std::string::npos) << run.text;
  // "[conv1..conv3] [relu3..fc2] (profile ...": the last layer of each stage.
  std::vector<std::string> stages;
  for (size_t open = run.text.find('[', at), close; open < run.text.find('(', at);
       open = run.text.find('[', close)) {
    close = run.text.find(']', open);
    auto range = run.text.substr(open + 1, close - open - 1);
    auto dots = range.find("..");
    stages.push_back("{last_layer: " +
                     (dots == std::string::npos ? range : range.substr(dots + 2)));
  }
  auto nodes = read_json(metrics);
  auto chosen = digests_by_actor(nodes, "pipeline_stage");
  EXPECT_EQ(stages.size(), chosen.size());
  EXPECT_EQ(nodes.at("heads")[0].at("samples").get<int64_t>(), 512);
  // The metrics name what the plan settled as the --set that gives these
  // stages (compare's check predicts the run with it), with any weight
  // gradient it hands on (weight_gradient: next).
  ASSERT_EQ(nodes.value("settled", nlohmann::json::array()).size(), 1u) << nodes.dump();
  const std::string settled = nodes.at("settled")[0];
  EXPECT_EQ(settled.rfind("pipeline.stages=[", 0), 0u) << settled;
  size_t from = 0;
  for (const auto& stage : stages) {
    from = settled.find(stage, from);
    ASSERT_NE(from, std::string::npos) << stage << " in " << settled;
  }
  auto local = run_job(*dir_,
                       {"run", workload, "--set", "job=pipeline", "--set", settled, "--mode",
                        "local", "--save-model", local_model},
                       "auto-local");
  EXPECT_EQ(chosen, digests_by_actor(local, "pipeline_stage")) << settled;
  EXPECT_FALSE(local.contains("settled")) << "its stages were given";
  // --save-model assembles the planned stages' weights (the topology it
  // reads again does not list them).
  EXPECT_EQ(max_difference(model, local_model), 0.0);
}

// `baton plan --out` writes a topology that `baton run` runs.
TEST_F(pipeline, a_planned_topology_runs) {
  auto profile = dir_->path() + "/profile.json";
  auto planned = dir_->path() + "/planned.yaml";
  auto p = run_baton({"profile", source_path("configs/pipeline.yaml"), "--out", profile,
                      "--microbatches", "1"});
  ASSERT_EQ(p.exit_code, 0) << p.text;
  auto q = run_baton({"plan", "--profile", profile, "--machines", "3", "--straight", "--out",
                      planned});
  ASSERT_EQ(q.exit_code, 0) << q.text;
  auto r = run_job(*dir_,
                   {"run", planned, "--set", "data.train_limit=256", "--set", "data.test_limit=64"},
                   "planned");
  EXPECT_FALSE(digests_by_actor(r, "pipeline_stage").empty());
}

// Invariant 2 with a replicated stage ("1-2-1"): the replicas sum their
// gradients before each step, so the run equals the unreplicated local run.
// Not bit for bit: the sum over a minibatch is taken in another order (per
// replica, then across): 3e-8 apart after 2 steps and 6e-8 after 3 with the
// last stage replicated, on weights of up to ~1.7 that the steps moved by 0.1-0.3.
// Training amplifies such differences: after a 4th step 6e-5 (a ReLU or a pool's
// maximum decided the other way by a rounding; from PyTorch's default
// initialisation, whose first steps hardly moved the weights, 4e-9 after 4 steps
// and 1e-5 to 2e-4 after 16). So the runs here are 3 steps (3 x 64 samples), and
// the bound 1e-6. Replicas end identical.
TEST_F(pipeline, a_replicated_stage_equals_the_local_run) {
  const std::vector<std::string> four{"--set", "data.microbatches=4", "--set",
                                      "data.train_limit=192"};
  auto local_model = dir_->path() + "/local-replicated.pt";
  run_job(*dir_,
          with(with(job("1f1b-flush"), four), {"--mode", "local", "--save-model", local_model}),
          "local-replicated");
  for (std::string schedule : {"gpipe", "1f1b-flush"}) {
    auto model = dir_->path() + "/" + schedule + "-replicated.pt";
    auto m = run_job(*dir_,
                     with(with(job(schedule), four),
                          {"--set", "pipeline.stages.1.replicas=2", "--save-model", model}),
                     schedule + "-replicated");
    auto digest = digests_by_actor(m, "pipeline_stage");
    ASSERT_EQ(digest.size(), 4u) << schedule;
    EXPECT_EQ(digest.at("stage1.0"), digest.at("stage1.1")) << schedule;
    EXPECT_EQ(m.at("heads")[0].at("samples").get<int64_t>(), 192) << schedule;
    EXPECT_LT(max_difference(model, local_model), 1e-6) << schedule;
  }
}

// Over node processes, with the replicas on different nodes and the last
// stage replicated (its replicas' reports merge into one result).
TEST_F(pipeline, replicas_on_node_processes_equal_the_local_run) {
  const std::vector<std::string> four{"--set", "data.microbatches=4", "--set",
                                      "data.train_limit=192"};
  auto local_model = dir_->path() + "/local-last-replicated.pt";
  auto local = run_job(
    *dir_, with(with(job("gpipe"), four), {"--mode", "local", "--save-model", local_model}),
    "local-last");
  auto model = dir_->path() + "/nodes-replicated.pt";
  auto m = run_job(*dir_,
                   with(with(job("gpipe"), four),
                        {"--set", "pipeline.stages.2.replicas=2", "--local-nodes", "2",
                         "--save-model", model}),
                   "nodes-replicated");
  EXPECT_LT(max_difference(model, local_model), 1e-6);
  ASSERT_EQ(m.at("heads").size(), 1u);
  EXPECT_EQ(m.at("heads")[0].at("samples").get<int64_t>(), 192);
  EXPECT_NEAR(m.at("heads")[0].at("test_accuracy").get<double>(),
              local.at("heads")[0].at("test_accuracy").get<double>(), 0.01);
}

// 1F1B with weight stashing, seen in the trace: at every stage the backward of
// a microbatch uses the version its forward used; stages admit at most
// PipeDream's NOAM microbatches (3 - i at stage i of 3); without vertical sync
// the stages' versions for one microbatch differ (so the next test can fail),
// with it they agree.
TEST_F(pipeline, stashing_and_vertical_sync_in_the_trace) {
  auto trace = dir_->path() + "/async.trace.json";
  run_job(*dir_, with(job("1f1b"), {"--set", "runtime.window=2", "--trace", trace}), "traced");
  auto actors = trace_by_actor(trace);
  ASSERT_EQ(actors.count("stage0") + actors.count("stage1") + actors.count("stage2"), 3u);
  bool stages_differ = false;
  for (int i = 0; i < 3; ++i) {
    const auto& events = actors.at("stage" + std::to_string(i));
    auto forward = versions(events, "forward");
    EXPECT_EQ(forward.size(), 1024u / 64);
    EXPECT_EQ(versions(events, "backward"), forward) << "stage" << i;
    if (i > 0 && versions(actors.at("stage0"), "forward") != forward)
      stages_differ = true;
    // In flight: forwards whose backward has not started yet.
    std::vector<std::pair<int64_t, int>> edges; // (time, +1 forward end / -1 backward start)
    for (const auto& e : events) {
      auto ts = e.at("ts").get<int64_t>();
      if (e.at("name") == "forward")
        edges.emplace_back(ts + e.at("dur").get<int64_t>(), +1);
      if (e.at("name") == "backward")
        edges.emplace_back(ts, -1);
    }
    std::sort(edges.begin(), edges.end());
    int now = 0, peak = 0;
    for (auto [ts, d] : edges)
      peak = std::max(peak, now += d);
    EXPECT_LE(peak, 3 - i) << "stage" << i;
  }
  EXPECT_TRUE(stages_differ) << "without vertical sync the stages should use other versions";

  auto synced = dir_->path() + "/vertical.trace.json";
  run_job(*dir_,
          with(job("1f1b"), {"--set", "runtime.window=2", "--set", "pipeline.vertical_sync=true",
                             "--trace", synced}),
          "vertical");
  auto vertical = trace_by_actor(synced);
  auto input = versions(vertical.at("stage0"), "forward");
  for (int i = 1; i < 3; ++i) {
    const auto& events = vertical.at("stage" + std::to_string(i));
    EXPECT_EQ(versions(events, "forward"), input) << "stage" << i;
    EXPECT_EQ(versions(events, "backward"), input) << "stage" << i;
  }
}

// backbone.checkpoint: every stage but the classifier starts from the
// pretrained backbone (pre-trained first here, as pretrain.if_missing
// says), in the local reference as in the actors.
TEST_F(pipeline, stages_start_from_a_pretrained_backbone) {
  const std::vector<std::string> pretrained{
    "--set", "backbone.checkpoint=" + dir_->path() + "/pretrained.pt",
    "--set", "backbone.pretrain.if_missing=pretrain",
    "--set", "backbone.pretrain.train_limit=256"};
  auto local = run_job(*dir_, with(with(job("gpipe"), pretrained), {"--mode", "local"}),
                       "pretrained-local");
  auto reference = digests_by_actor(local, "pipeline_stage");
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_EQ(digests_by_actor(run_job(*dir_, with(job("gpipe"), pretrained), "pretrained"),
                             "pipeline_stage"),
            reference);
  // From the seeded weights, the same run ends elsewhere: the file was read.
  EXPECT_NE(digests_by_actor(shared_run(*dir_, with(job("gpipe"), {"--mode", "local"}), "local"),
                             "pipeline_stage"),
            reference);
}

// A pipeline run's --save-model is a backbone checkpoint a transfer job reads.
TEST_F(pipeline, a_saved_pipeline_model_is_a_transfer_backbone) {
  auto model = dir_->path() + "/pretrained-by-pipeline.pt";
  run_job(*dir_, with(job("1f1b"), {"--save-model", model}), "save");
  auto transfer = run_job(*dir_,
                          {"run", source_path("configs/transfer.yaml"), "--set",
                           "backbone.checkpoint=" + model, "--set", "data.train_limit=512",
                           "--set", "data.test_limit=128"},
                          "transfer-on-saved");
  EXPECT_EQ(transfer.at("heads").size(), 3u);
}

// Convergence: the convnet trained from scratch with asynchronous 1F1B over 3
// stages (configs/pipeline.yaml at lr 0.0125) reaches 77% test accuracy (all
// 10,000 test images) after 16,384 samples: 80.3% on an AVX2 machine
// (2026-12-01; the static 1F1B order repeats its arithmetic), 78.6% after 12,288.
// Chance is 10%. From PyTorch's default initialisation the convnet sat at a loss
// of 2.30 for its first ~150 steps and took 30,000 samples to 79.6%; He's (the
// convnet's since 2026-12-01) learns from the first step. About 32 s alone on 2
// cores (30,000 samples took 54 s, 60,000 102 s).
TEST_F(pipeline, convnet_1f1b_over_three_stages_reaches_77_percent_in_16384_samples) {
  auto m = run_job(*dir_,
                   {"run", source_path("configs/pipeline.yaml"), "--set", "data.epochs=1",
                    "--set", "data.train_limit=16384", "--set", "data.test_limit=0"},
                   "converge");
  ASSERT_EQ(m.at("heads").size(), 1u);
  EXPECT_GE(m.at("heads")[0].at("test_accuracy").get<double>(), 0.77);
}
