// A user's TorchScript model as a layered model: written at test time by
// Python's torch (skipped when no Python with torch is available), compared
// against the output Python computed for the same input; modules of another
// form refused with their structure, not the interpreter's traceback.

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/export.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/pretrain.hpp"
#include "model/core/training.hpp"
#include "tests/support/python_torch.hpp"
#include "tests/support/scratch_dir.hpp"

namespace fs = std::filesystem;
using baton::testing::no_python_torch;
using baton::testing::python_with_torch;
using baton::testing::run_python;
using baton::testing::scratch_dir;
using namespace baton::model;

namespace {

// Children 0..4 of a Sequential; child 3 is itself a Sequential, so its
// parameters are nested ("3.0.weight"). io.pt holds an input and the output
// of the eager model for it. The other files are modules baton must refuse
// or measure: their forward is not their children in order (res.pt: it
// flattens first; skip.pt: a residual sum), they have no children
// (leaf.pt), or their output is not [N, features] (unflat.pt). norm.pt has
// batch norm, whose running statistics are buffers.
const char* make_models_py = R"py(
import sys
import torch
out = sys.argv[1]
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Conv2d(1, 4, 3, padding=1),
    torch.nn.ReLU(),
    torch.nn.Flatten(),
    torch.nn.Sequential(torch.nn.Linear(4 * 8 * 8, 16), torch.nn.Tanh()),
    torch.nn.Linear(16, 3))
torch.jit.script(m).save(out + "/model.pt")
x = torch.randn(5, 1, 8, 8)
with torch.no_grad():
    y = m(x)
class Tensors(torch.nn.Module):
    def __init__(self, x, y):
        super().__init__()
        self.register_buffer("x", x)
        self.register_buffer("y", y)
    def forward(self):
        return self.x
torch.jit.script(Tensors(x, y)).save(out + "/io.pt")

class Res(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 16)
        self.b = torch.nn.Linear(16, 3)
    def forward(self, x):
        return self.b(torch.relu(self.a(x.flatten(1))))
torch.jit.script(Res()).save(out + "/res.pt")

class Skip(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(1, 1, 3, padding=1)
        self.f = torch.nn.Flatten()
        self.b = torch.nn.Linear(64, 3)
    def forward(self, x):
        return self.b(self.f(self.a(x) + x))
torch.jit.script(Skip()).save(out + "/skip.pt")

class Leaf(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
    def forward(self, x):
        return x * self.w
torch.jit.script(Leaf()).save(out + "/leaf.pt")

torch.jit.script(torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU())).save(
    out + "/unflat.pt")

class NaN(torch.nn.Module):
    def forward(self, x):
        return x * float("nan")
class Log(torch.nn.Module):
    def forward(self, x):
        return torch.log(x)
torch.jit.script(torch.nn.Sequential(
    torch.nn.Flatten(), torch.nn.Linear(64, 3), NaN())).save(out + "/nan.pt")
torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), Log())).save(out + "/log.pt")

torch.jit.script(torch.nn.Sequential(
    torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.BatchNorm2d(2), torch.nn.Flatten(),
    torch.nn.Linear(2 * 8 * 8, 3))).save(out + "/norm.pt")

# Tied weights: d uses b's weight (one tensor); views.pt's b and d hold two
# halves of one storage, which baton cannot train as one parameter.
class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Flatten()
        self.b = torch.nn.Linear(64, 64)
        self.c = torch.nn.Tanh()
        self.d = torch.nn.Linear(64, 64)
        self.e = torch.nn.Linear(64, 3)
        self.d.weight = self.b.weight
    def forward(self, x):
        return self.e(self.d(self.c(self.b(self.a(x)))))
torch.jit.script(Tied()).save(out + "/tied.pt")
views = Tied()
base = torch.randn(128, 64)
views.b.weight = torch.nn.Parameter(base[:64])
views.d.weight = torch.nn.Parameter(base[64:])
torch.jit.script(views).save(out + "/views.pt")
)py";

/// Writes the models once for the whole suite (importing torch in Python
/// takes seconds); skips without a python3 that has torch.
class torchscript : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (python_with_torch().empty()) {
      skip_ = no_python_torch;
      return;
    }
    try {
      scratch_ = std::make_unique<scratch_dir>("torchscript");
    } catch (const std::exception& e) {
      failure_ = e.what();
      return;
    }
    dir_ = scratch_->path();
    const auto run = run_python(dir_.string(), "make_models.py", make_models_py, {dir_.string()});
    if (run.exit_code != 0)
      failure_ = "make_models.py failed (exit " + std::to_string(run.exit_code) + "): " + run.text;
  }
  static void TearDownTestSuite() { scratch_.reset(); }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
    auto io = torch::jit::load((dir_ / "io.pt").string());
    x_ = io.attr("x").toTensor();
    y_ = io.attr("y").toTensor();
    spec_ = spec_of("model.pt");
  }

  /// The settings of the file `name` of the suite's directory, for the
  /// models' samples [1, 8, 8].
  static model_spec spec_of(const std::string& name) {
    model_spec spec;
    spec.name = "torchscript";
    spec.path = (dir_ / name).string();
    spec.in_channels = 1;
    spec.in_height = 8;
    spec.in_width = 8;
    return spec;
  }

  /// make_model's error for the file `name` (a test failure when it builds).
  static std::string refusal(const std::string& name) {
    try {
      make_model(spec_of(name));
    } catch (const error& e) {
      return e.what();
    }
    ADD_FAILURE() << name << " was accepted";
    return "";
  }

  static inline std::unique_ptr<scratch_dir> scratch_;
  static inline fs::path dir_;
  static inline std::string skip_, failure_;
  model_spec spec_;
  at::Tensor x_, y_;
};

} // namespace

TEST_F(torchscript, children_become_layers_with_python_output) {
  auto m = make_model(spec_);
  EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters())
    names.push_back(p.first);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.0.weight", "3.0.bias",
                                             "4.weight", "4.bias"}));
  EXPECT_EQ(parameter_count(m), 4 * 9 + 4 + 256 * 16 + 16 + 16 * 3 + 3);
  torch::NoGradGuard no_grad;
  auto y = m.forward(x_);
  EXPECT_TRUE(torch::allclose(y, y_, 1e-5, 1e-6)) << (y - y_).abs().max();
  // Invariant 1 holds for TorchScript layers too.
  for (size_t a = 0; a <= m.size(); ++a)
    EXPECT_TRUE(torch::equal(m.slice(a, m.size()).forward(m.slice(0, a).forward(x_)), y))
        << "split at " << a;
}

TEST_F(torchscript, parameters_are_the_interpreters_tensors) {
  auto m = make_model(spec_);
  const std::string file = (dir_ / "ckpt.pt").string();
  save_checkpoint(m, file);
  torch::NoGradGuard no_grad;
  auto original = m.forward(x_);
  for (auto& p : m.parameters())
    p.zero_();
  // Zeroed through named_parameters(): the interpreter sees it (the output is
  // the last layer's zero bias).
  EXPECT_TRUE(torch::equal(m.forward(x_), torch::zeros_like(original)));
  load_checkpoint(m, file);
  EXPECT_TRUE(torch::equal(m.forward(x_), original));
}

TEST_F(torchscript, layers_train) {
  auto model = make_model(spec_);
  const std::string before = weights_digest(model);
  head_trainer trainer(model, make_task("all3", {0, 1, 2}), optimizer_spec{});
  auto labels = torch::tensor({0, 1, 2, 0, 1}, torch::kInt64);
  const double first = trainer.train(x_, labels, 1, true);
  for (int i = 0; i < 20; ++i)
    trainer.train(x_, labels, 1, true);
  EXPECT_NE(weights_digest(model), before);
  EXPECT_LT(trainer.train(x_, labels, 1, true), first);
}

TEST_F(torchscript, corrupt_file_is_an_error_naming_it) {
  const std::string bad = (dir_ / "bad.pt").string();
  std::ofstream(bad) << "not a torchscript archive";
  spec_.path = bad;
  try {
    make_model(spec_);
    ADD_FAILURE() << "expected model::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(torchscript, a_forward_that_is_not_its_children_in_order_is_refused_with_its_structure) {
  // res.pt flattens in its forward: its first child fails on the samples.
  const std::string res = refusal("res.pt");
  for (const char* part : {"res.pt", "child 'a' (Linear), given the data's samples, fails on an "
                           "input of shape [2, 1, 8, 8]", "mat1 and mat2 shapes cannot be "
                           "multiplied", "the module is Res with children 'a' (Linear), 'b' "
                           "(Linear)", "torch.nn.Sequential", "docs/models.md"})
    EXPECT_NE(res.find(part), std::string::npos) << part << " not in: " << res;
  // The reason, not the interpreter's traceback.
  EXPECT_EQ(res.find("Traceback"), std::string::npos) << res;
  EXPECT_EQ(res.find('\n'), std::string::npos) << res;
  // skip.pt's children run in order, but its forward adds a residual.
  const std::string skip = refusal("skip.pt");
  for (const char* part : {"its forward does not compute its children in order",
                           "the module is Skip with children 'a' (Conv2d), 'f' (Flatten), 'b' "
                           "(Linear)"})
    EXPECT_NE(skip.find(part), std::string::npos) << part << " not in: " << skip;
  const std::string leaf = refusal("leaf.pt");
  EXPECT_NE(leaf.find("the module is Leaf with no child modules"), std::string::npos) << leaf;
}

// Issue 32 item 13: a model that always outputs NaN was refused as "does not
// compute its children in order" (NaN is unequal to itself). The reason is
// its output, and the first child that made it; a model NaN only on some
// inputs (a log of negative values) has the right form and is accepted.
TEST_F(torchscript, a_model_that_outputs_nan_is_refused_for_that) {
  const std::string nan = refusal("nan.pt");
  for (const char* part : {"nan.pt: its forward returns no finite value on a probe of shape "
                           "[2, 1, 8, 8] (all NaN)", "child '2' (NaN) is the first child whose "
                           "output is not finite", "cannot be trained"})
    EXPECT_NE(nan.find(part), std::string::npos) << part << " not in: " << nan;
  EXPECT_EQ(nan.find("in order"), std::string::npos) << nan;
  EXPECT_NO_THROW(make_model(spec_of("log.pt")));
}

TEST_F(torchscript, a_module_for_other_samples_is_refused_naming_their_shape) {
  model_spec spec = spec_;
  spec.in_height = spec.in_width = 28; // the model's Linear takes 4 x 8 x 8
  try {
    make_model(spec);
    ADD_FAILURE() << "a model for 8x8 samples accepted 28x28";
  } catch (const error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[2, 1, 28, 28]"), std::string::npos) << what;
    EXPECT_EQ(what.find("Traceback"), std::string::npos) << what;
  }
}

TEST_F(torchscript, backbone_features_are_measured_at_load) {
  EXPECT_EQ(backbone_features(spec_), 3); // the last Linear's 3 outputs
  // Listed and measured in one load.
  EXPECT_EQ(list_layers(spec_, with_features::yes).features, 3);
  EXPECT_EQ(list_layers(spec_).features, 0); // not asked: no probe
  const auto unflat = list_layers(spec_of("unflat.pt"), with_features::yes);
  EXPECT_EQ(unflat.features, 0);
  EXPECT_NE(unflat.features_error.find("torch.nn.Flatten()"), std::string::npos)
    << unflat.features_error;
  const auto m = make_model(spec_);
  EXPECT_EQ(output_features(m, spec_), 3);
  // A backbone whose output is not [N, features] is told to end in Flatten.
  try {
    backbone_features(spec_of("unflat.pt"));
    ADD_FAILURE() << "unflat.pt measured";
  } catch (const error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("outputs [2, 4, 6, 6]"), std::string::npos) << what;
    EXPECT_NE(what.find("torch.nn.Flatten()"), std::string::npos) << what;
  }
}

TEST_F(torchscript, a_missing_file_is_an_error_naming_it) {
  const std::string missing = (dir_ / "missing.pt").string();
  spec_.path = missing;
  try {
    make_model(spec_);
    ADD_FAILURE() << "expected model::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(torchscript, batch_norm_statistics_are_the_interpreters_buffers) {
  auto m = make_model(spec_of("norm.pt"));
  std::vector<std::string> names;
  for (const auto& b : m.named_buffers())
    names.push_back(b.first);
  EXPECT_EQ(names, (std::vector<std::string>{"1.running_mean", "1.running_var",
                                             "1.num_batches_tracked"}));
  // A forward in training mode updates them in place, as a checkpoint sees.
  m.train(true);
  const auto before = m.named_buffers().at(0).second.clone();
  torch::NoGradGuard no_grad;
  m.forward(x_);
  EXPECT_FALSE(torch::equal(m.named_buffers().at(0).second, before));
  EXPECT_EQ(m.named_buffers().at(2).second.item<int64_t>(), 1);
}

// -- tied weights (DESIGN invariant 14) -------------------------------------------

// `self.d.weight = self.b.weight`: one parameter, named in b, the same tensor
// in both layers and in the interpreter; a step through it changes both.
TEST_F(torchscript, a_weight_two_children_share_is_one_parameter) {
  auto m = make_model(spec_of("tied.pt"));
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters())
    names.push_back(p.first);
  EXPECT_EQ(names, (std::vector<std::string>{"b.weight", "b.bias", "d.bias", "e.weight",
                                             "e.bias"}));
  EXPECT_EQ(parameter_count(m), 64 * 64 + 64 + 64 + 64 * 3 + 3);
  const auto weight = [&](const char* layer) {
    return m.layers()[m.index_of(layer)].module.ptr()->named_parameters()["weight"];
  };
  EXPECT_TRUE(weight("d").is_same(weight("b")));
  torch::NoGradGuard no_grad;
  const auto before = m.forward(x_);
  weight("b").mul_(2); // the interpreter's d sees it too
  EXPECT_FALSE(torch::equal(m.forward(x_), before));
  weight("b").div_(2);
  EXPECT_TRUE(torch::allclose(m.forward(x_), before));
}

TEST_F(torchscript, children_sharing_storage_as_other_views_are_refused_naming_both) {
  const auto text = refusal("views.pt");
  for (const char* part : {"views.pt", "'d.weight'", "'b.weight'", "another view"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in: " << text;
}

// The export (--save-model) writes the file's children with the trained
// tensors: b and d still share one weight in it.
TEST_F(torchscript, the_export_keeps_the_tie) {
  auto m = make_model(spec_of("tied.pt"));
  {
    torch::NoGradGuard no_grad;
    m.named_parameters().front().second.add_(0.25); // b.weight, trained
  }
  const std::string file = (dir_ / "tied-export.pt").string();
  export_options options;
  options.script_path = spec_of("tied.pt").path;
  export_model(m, file, options);
  auto loaded = torch::jit::load(file);
  const auto b = loaded.attr("b").toModule().attr("weight").toTensor();
  const auto d = loaded.attr("d").toModule().attr("weight").toTensor();
  EXPECT_EQ(b.data_ptr(), d.data_ptr());
  EXPECT_TRUE(torch::equal(b, m.named_parameters().front().second));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(loaded.forward({x_}).toTensor(), m.forward(x_), 1e-5, 1e-6));
}

TEST_F(torchscript, a_model_that_ends_in_the_tasks_logits_is_trained_as_given) {
  // model.pt ends in Linear(16, 3): three outputs.
  const auto given = make_model(spec_);
  const auto as_given = make_pretrain_model(spec_, 3);
  EXPECT_EQ(as_given.layers().size(), given.layers().size()) << "no classifier for 3 classes";
  EXPECT_EQ(as_given.layers().back().name, given.layers().back().name);
  const auto appended = make_pretrain_model(spec_, 10);
  ASSERT_EQ(appended.layers().size(), given.layers().size() + 1);
  EXPECT_EQ(appended.layers().back().name, "fc2");
  torch::NoGradGuard no_grad;
  EXPECT_EQ(appended.forward(x_).sizes(), (std::vector<int64_t>{x_.size(0), 10}));
}
