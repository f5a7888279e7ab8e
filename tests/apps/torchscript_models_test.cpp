// `baton run` with the user's TorchScript model in every strategy whose
// arithmetic allows one: transfer (a 64-feature backbone: the heads take the
// width measured at load), pipeline, data-parallel over the ring and the
// parameter shards (the actors end with the one-process reference's
// weights) and with a frozen prefix; and the refusals: a module whose forward is not its children in
// order (its structure shown), IST with a model it cannot cut, and a model
// key the job would not use (file:line). The models are written by Python's
// torch (skipped without a python3 that can import it); the data is
// Fashion-MNIST, as in the shipped configs.

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/python_files.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

// backbone64.pt: [N, 1, 28, 28] -> 64 features (not the convnet's 256);
// logits10.pt: the same with a last Linear to the ten classes' logits;
// partly_frozen64.pt: backbone64 whose convolution's weight (not its
// bias) does not require grad;
// dropout64.pt: backbone64 with a dropout before its Linear and its ReLUs
// in place (torchvision's form);
// flattening.pt: a module whose forward flattens before its first child, so
// its children are not its layers.
constexpr const char* make_scripted_models_py = R"py(
import sys
import torch
from torch import nn
out = sys.argv[1]
torch.manual_seed(0)
backbone = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 14 * 14, 64), nn.ReLU())
torch.jit.script(backbone).save(out + "/backbone64.pt")
torch.jit.script(nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 14 * 14, 64), nn.ReLU(), nn.Linear(64, 10))).save(
    out + "/logits10.pt")

torch.manual_seed(0)
torch.jit.script(nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.5), nn.Linear(8 * 14 * 14, 64), nn.ReLU(inplace=True))).save(
    out + "/dropout64.pt")

torch.manual_seed(0)
partly = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 14 * 14, 64), nn.ReLU())
partly[0].weight.requires_grad_(False)
torch.jit.script(partly).save(out + "/partly_frozen64.pt")

class Flattening(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 64)
        self.out = nn.Linear(64, 10)
    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))
torch.jit.script(Flattening()).save(out + "/flattening.pt")

class NaNInTraining(nn.Module):
    def forward(self, x):
        if self.training:
            return x * float("nan")
        return x
torch.jit.script(nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 14 * 14, 64), NaNInTraining(), nn.ReLU())).save(
    out + "/nan_in_training.pt")
)py";

/// Writes the models once for the suite; every test skips without torch.
class torchscript_models : public python_files<torchscript_models> {
public:
  static constexpr const char* scratch_name = "torchscript-models";
  static constexpr const char* script = make_scripted_models_py;

protected:
  /// `baton run` of the shipped config `config` with backbone.model:
  /// torchscript from the file `model`, on `samples` training samples, and
  /// the `more` overrides.
  static std::vector<std::string> job(const std::string& config, const std::string& model,
                                      int samples, const std::vector<std::string>& more) {
    std::vector<std::string> args{"run",   source_path(config),
                                  "--set", "backbone.model=torchscript",
                                  "--set", "backbone.path=" + path(model),
                                  "--set", "backbone.checkpoint=none",
                                  "--set", "data.train_limit=" + std::to_string(samples),
                                  "--set", "data.test_limit=256"};
    for (const auto& item : more) {
      args.push_back("--set");
      args.push_back(item);
    }
    return args;
  }

  /// The test accuracy of the result `name` ("all10", "workers", "stage1").
  static double accuracy(const nlohmann::json& metrics, const std::string& name) {
    for (const auto& head : metrics.at("heads"))
      if (head.at("name") == name)
        return head.at("test_accuracy").get<double>();
    ADD_FAILURE() << "no result '" << name << "' in " << metrics.dump();
    return 0;
  }

  /// A `baton run` that must fail: its output, after checking it names the
  /// error without a TorchScript traceback or a crash.
  static std::string refused(const std::vector<std::string>& args) {
    const auto out = run_baton_bounded(args, 120);
    EXPECT_NE(out.exit_code, 0) << out.text;
    EXPECT_LT(out.exit_code, 128) << "ended by a signal: " << out.text;
    EXPECT_FALSE(contains(out.text, "Traceback")) << out.text;
    return out.text;
  }

};

// Ten classes: chance is 10%; each of these reaches 30-50% (seeded, the same
// every run), so 20% is training progress and not a coin.
constexpr double above_chance = 0.2;

TEST_F(torchscript_models, transfer_heads_take_the_width_the_backbone_outputs) {
  const auto metrics = run_job(*dir_,
                               job("configs/transfer.yaml", "backbone64.pt", 1024,
                                   {"backbone.split=[\"2\"]"}),
                               "transfer");
  EXPECT_EQ(metrics.at("heads").size(), 3u);
  EXPECT_GT(accuracy(metrics, "all10"), above_chance);
}

TEST_F(torchscript_models, pipeline_trains_its_children_as_stages) {
  const auto metrics = run_job(*dir_,
                               job("configs/pipeline.yaml", "backbone64.pt", 1024,
                                   {"pipeline.schedule=gpipe", "data.microbatches=2",
                                    "pipeline.stages=[{last_layer: \"2\"}, {last_layer: fc2}]"}),
                               "pipeline");
  expect_steps_trained(metrics, 2, 1024 / 64 * 2); // each stage: 16 steps of 2 microbatches
  EXPECT_GT(accuracy(metrics, "stage1"), above_chance);
}

TEST_F(torchscript_models, data_parallel_ring_and_ps_end_with_the_references_weights) {
  const auto args = job("configs/data-parallel.yaml", "backbone64.pt", 1024,
                        {"data_parallel.model=torchscript", "data.epochs=1"});
  const auto actors = run_job(*dir_, args, "ring");
  EXPECT_GT(accuracy(actors, "workers"), above_chance);
  auto local = args;
  local.insert(local.end(), {"--mode", "local"});
  const auto reference = run_job(*dir_, local, "ring-local");
  const auto expected = reference.at("heads").at(0).at("weights_digest").get<std::string>();
  EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker").at("worker.0"), expected);
  // Parameter shards instead of the ring: the same SGD steps.
  auto ps = args;
  ps.insert(ps.end(), {"--set", "data_parallel.exchange=ps"});
  EXPECT_EQ(digests_by_actor(run_job(*dir_, ps, "ps"), "data_parallel_worker").at("worker.0"),
            expected);
}

// Dropout draws its mask from PyTorch's one generator per process, which
// the stages' and workers' threads shared in an order timing decided:
// every run of such a model ended with other weights, and no layout with
// its reference's. Its mask is now a function of the seed, the layer and
// its input: the same in every run, layout and process. The second stage
// starts with ReLU(inplace=True), which autograd refused on the stage's
// input ("a leaf Variable that requires grad is being used in an in-place
// operation"): it computes on a copy.
TEST_F(torchscript_models, a_model_with_dropout_and_in_place_relus_is_the_same_in_every_layout) {
  const auto digest = [](const nlohmann::json& metrics, const std::string& name) {
    for (const auto& head : metrics.at("heads"))
      if (head.at("name") == name)
        return head.at("weights_digest").get<std::string>();
    ADD_FAILURE() << "no result '" << name << "' in " << metrics.dump();
    return std::string{};
  };
  const auto pipeline = job("configs/pipeline.yaml", "dropout64.pt", 1024,
                            {"pipeline.schedule=gpipe", "data.microbatches=2",
                             "pipeline.stages=[{last_layer: \"0\"}, {last_layer: fc2}]"});
  const auto stages = digest(run_job(*dir_, pipeline, "dropout-pipeline"), "stage1");
  auto local = pipeline;
  local.insert(local.end(), {"--mode", "local"});
  EXPECT_EQ(digest(run_job(*dir_, local, "dropout-pipeline-local"), "stage1"), stages);
  auto nodes = pipeline;
  nodes.insert(nodes.end(), {"--local-nodes", "2"});
  EXPECT_EQ(digest(run_job(*dir_, nodes, "dropout-pipeline-nodes"), "stage1"), stages);

  const auto ring = job("configs/data-parallel.yaml", "dropout64.pt", 1024,
                        {"data_parallel.model=torchscript", "data.epochs=1"});
  const auto workers = digest(run_job(*dir_, ring, "dropout-ring"), "workers");
  auto ring_local = ring;
  ring_local.insert(ring_local.end(), {"--mode", "local"});
  EXPECT_EQ(digest(run_job(*dir_, ring_local, "dropout-ring-local"), "workers"), workers);
  EXPECT_EQ(digest(run_job(*dir_, ring, "dropout-ring-again"), "workers"), workers);
}

// A parameter saved with requires_grad False is the user's frozen one (a
// pretrained embedding, a fixed filter): it was trained all the same, and
// with weight decay it moved even where its gradient was zero. Now no
// layout steps it, and every layout still ends with the reference's weights.
TEST_F(torchscript_models, a_parameter_the_file_freezes_is_never_trained) {
  const auto ring = job("configs/data-parallel.yaml", "partly_frozen64.pt", 1024,
                        {"data_parallel.model=torchscript", "data.epochs=1",
                         "data_parallel.optimizer={name: adamw, lr: 0.001, weight_decay: 0.1}"});
  auto local = ring;
  local.insert(local.end(), {"--mode", "local"});
  const auto reference = run_job(*dir_, local, "frozen-local");
  const auto expected = reference.at("heads").at(0).at("weights_digest").get<std::string>();
  auto ps = ring;
  ps.insert(ps.end(), {"--set", "data_parallel.exchange=ps", "--local-nodes", "2"});
  EXPECT_EQ(digests_by_actor(run_job(*dir_, ps, "frozen-ps"), "data_parallel_worker")
              .at("worker.0"),
            expected);
  auto saved = ring;
  saved.insert(saved.end(), {"--local-nodes", "2", "--save-model", path("partly_frozen.out.pt")});
  EXPECT_EQ(digests_by_actor(run_job(*dir_, saved, "frozen-ring"), "data_parallel_worker")
              .at("worker.0"),
            expected);
  const auto pipeline = job("configs/pipeline.yaml", "partly_frozen64.pt", 1024,
                            {"pipeline.schedule=1f1b", "optimizer.weight_decay=0.1",
                             "pipeline.stages=[{last_layer: \"4\"}, {last_layer: fc2}]"});
  auto pipeline_saved = pipeline;
  pipeline_saved.insert(pipeline_saved.end(),
                        {"--save-model", path("partly_frozen.pipeline.pt")});
  run_job(*dir_, pipeline_saved, "frozen-pipeline");
  // In plain PyTorch: the weight as the file has it, the bias trained.
  const auto check = run_python(dir_->path(), "frozen_check.py", R"py(
import sys
import torch
given = dict(torch.jit.load(sys.argv[1]).named_parameters())
for trained in sys.argv[2:]:
    out = dict(torch.jit.load(trained).named_parameters())
    print(trained, torch.equal(out["0.weight"], given["0.weight"]),
          torch.equal(out["0.bias"], given["0.bias"]))
)py",
                                {path("partly_frozen64.pt"), path("partly_frozen.out.pt"),
                                 path("partly_frozen.pipeline.pt")});
  ASSERT_EQ(check.exit_code, 0) << check.text;
  EXPECT_TRUE(contains(check.text, "partly_frozen.out.pt True False")) << check.text;
  EXPECT_TRUE(contains(check.text, "partly_frozen.pipeline.pt True False")) << check.text;
}

TEST_F(torchscript_models, a_model_that_ends_in_the_classes_logits_is_trained_as_given) {
  // No fc2 on top of its logits: the stages name its own last child.
  const auto args = job("configs/pipeline.yaml", "logits10.pt", 1024,
                        {"pipeline.stages=[{last_layer: \"2\"}, {last_layer: \"6\"}]",
                         "data.epochs=1"});
  const auto out = run_baton_bounded(with(args, {"--mode", "local"}), 300);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(contains(out.text, "ends in 10 outputs, the task's classes: trained as given"))
    << out.text;
  // backbone64.pt gets its classifier, and the log says so.
  const auto appended = run_baton_bounded(
    with(job("configs/pipeline.yaml", "backbone64.pt", 256,
             {"pipeline.stages=[{last_layer: \"2\"}, {last_layer: fc2}]", "data.epochs=1"}),
         {"--mode", "local"}),
    300);
  ASSERT_EQ(appended.exit_code, 0) << appended.text;
  EXPECT_TRUE(contains(appended.text, "classifier fc2 appended, Linear(64 -> 10)"))
    << appended.text;
  // Asked for, logits10.pt gets one too: its stages end at fc2.
  const auto asked = run_baton_bounded(
    with(job("configs/pipeline.yaml", "logits10.pt", 256,
             {"backbone.classifier=append",
              "pipeline.stages=[{last_layer: \"2\"}, {last_layer: fc2}]", "data.epochs=1"}),
         {"--mode", "local"}),
    300);
  ASSERT_EQ(asked.exit_code, 0) << asked.text;
  EXPECT_TRUE(contains(asked.text, "backbone.classifier is append: classifier fc2 appended, "
                                   "Linear(10 -> 10)"))
    << asked.text;
}

TEST_F(torchscript_models, data_parallel_freezes_a_prefix_of_its_children) {
  const auto args = job("configs/data-parallel.yaml", "backbone64.pt", 1024,
                        {"data_parallel.model=torchscript", "data.epochs=2",
                         "data_parallel.freeze={up_to: \"2\", cache: memory}"});
  const auto actors = run_job(*dir_, args, "frozen");
  for (const auto& actor : actors.at("actors"))
    if (actor.at("role") == "data_parallel_worker") {
      // Children 0, 1 and 2 frozen; their output cached in epoch 1, read in epoch 2.
      EXPECT_EQ(actor.at("figures").at("frozen_layers").get<double>(), 3) << actor.dump();
      EXPECT_GT(actor.at("figures").at("cache_hits").get<double>(), 0) << actor.dump();
    }
  EXPECT_GT(accuracy(actors, "workers"), above_chance);
  auto local = args;
  local.insert(local.end(), {"--mode", "local"});
  const auto reference = run_job(*dir_, local, "frozen-local");
  EXPECT_EQ(digests_by_actor(actors, "data_parallel_worker").at("worker.0"),
            reference.at("heads").at(0).at("weights_digest").get<std::string>());
}

// Issue 32 item 11: a model that computes NaN trained to NaN weights with
// exit 0 and a warning that blamed the learning rate. The first loss that is
// not finite names the layer whose output went NaN (child '5', a layer
// without parameters: its own arithmetic), and the run exits 1: in the
// data-parallel actors, their one-process reference and a pipeline's last stage.
TEST_F(torchscript_models, a_model_that_computes_nan_fails_naming_the_layer) {
  const auto dp = job("configs/data-parallel.yaml", "nan_in_training.pt", 256,
                      {"data_parallel.model=torchscript", "data.epochs=1"});
  auto local = dp;
  local.insert(local.end(), {"--mode", "local"});
  const auto pipeline = job("configs/pipeline.yaml", "nan_in_training.pt", 256,
                            {"pipeline.schedule=gpipe", "data.microbatches=2", "data.epochs=1",
                             "pipeline.stages=[{last_layer: \"2\"}, {last_layer: fc2}]"});
  for (const auto& args : {dp, local, pipeline}) {
    const auto out = run_baton_bounded(args, 300);
    SCOPED_TRACE(out.text);
    EXPECT_EQ(out.exit_code, 1);
    EXPECT_TRUE(contains(out.text, "the training loss is not finite (nan); layer '5' ("));
    EXPECT_TRUE(contains(out.text, ") is the first whose output is not finite (NaN), given a "
                                   "finite input; it has no parameters: its own arithmetic"));
    EXPECT_TRUE(contains(out.text, "the training loss is not finite for "));
    EXPECT_TRUE(contains(out.text, "from epoch 1, so its weights are not finite either: the "
                                   "run failed"));
  }
}

TEST_F(torchscript_models, a_module_that_is_not_its_children_in_order_is_shown) {
  const auto text = refused(job("configs/pipeline.yaml", "flattening.pt", 256, {}));
  for (const char* part : {"flattening.pt", "child 'hidden' (Linear), given the data's samples",
                           "the module is Flattening with children 'hidden' (Linear), 'out' "
                           "(Linear)",
                           "torch.nn.Sequential"})
    EXPECT_TRUE(contains(text, part)) << part << " not in: " << text;
}

TEST_F(torchscript_models, ist_says_which_models_it_cuts_and_why) {
  const auto text = refused({"run", source_path("configs/ist.yaml"), "--set", "ist.model=convnet"});
  for (const char* part : {"--set ist.model=convnet", "partitions the hidden neurons of an mlp",
                           "deals the residual blocks of a ResNet"})
    EXPECT_TRUE(contains(text, part)) << part << " not in: " << text;
}

TEST_F(torchscript_models, a_model_key_the_job_does_not_use_is_refused_at_its_line) {
  // job: ist trains ist.model's network: backbone.model (line 6) is not
  // used, and data-parallel's two model keys must agree (line 11).
  const std::string ist = path("ist.yaml");
  std::ofstream(ist) << "job: ist\n"
                        "data:\n"
                        "  dataset: synthetic\n"
                        "  synthetic_shape: [1, 28, 28]\n"
                        "backbone:\n"
                        "  model: torchscript\n"
                        "  path: backbone64.pt\n"
                        "tasks:\n"
                        "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  auto text = refused({"run", ist});
  EXPECT_TRUE(contains(text, "ist.yaml:6: 'backbone.model' is torchscript")) << text;
  EXPECT_TRUE(contains(text, "ist.model")) << text;

  const std::string dp = path("data-parallel.yaml");
  std::ofstream(dp) << "job: data-parallel\n"
                       "data:\n"
                       "  dataset: synthetic\n"
                       "  synthetic_shape: [1, 28, 28]\n"
                       "backbone:\n"
                       "  model: torchscript\n"
                       "  path: backbone64.pt\n"
                       "  checkpoint: none\n"
                       "data_parallel:\n"
                       "  workers: 2\n"
                       "  model: convnet\n"
                       "tasks:\n"
                       "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n";
  text = refused({"run", dp});
  EXPECT_TRUE(contains(text, "data-parallel.yaml:11: 'data_parallel.model' is convnet, but "
                             "backbone.model (")) << text;
  EXPECT_TRUE(contains(text, "data-parallel.yaml:6) is torchscript")) << text;
  // backbone.path beside a model that is not torchscript would be ignored.
  text = refused({"run", dp, "--set", "backbone.model=convnet", "--set",
                  "data_parallel.model=convnet"});
  EXPECT_TRUE(contains(text, "data-parallel.yaml:7: 'backbone.path' is read with "
                             "backbone.model: torchscript only")) << text;
}

} // namespace
