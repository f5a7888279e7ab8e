// A user's TorchScript backbone as a layered model: written at test time by
// Python's torch (skipped when no Python with torch is available), compared
// against the output Python computed for the same input.

#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <fstream>
#include <map>
#include <memory>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/training.hpp"
#include "tests/support/scratch_dir.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using namespace baton::model;

namespace {

// Children 0..4 of a Sequential; child 3 is itself a Sequential, so its
// parameters are nested ("3.0.weight"). io.pt holds an input and the output
// of the eager model for it.
const char* make_model_py = R"py(
import sys
try:
    import torch
except ImportError:
    sys.exit(3)  # this interpreter has no torch: the test tries the next one
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
)py";

/// Writes the model once for the whole suite (importing torch in Python takes
/// seconds). The first interpreter that has torch writes it; none: skip.
class torchscript : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    try {
      scratch_ = std::make_unique<scratch_dir>("torchscript");
    } catch (const std::exception& e) {
      failure_ = e.what();
      return;
    }
    dir_ = scratch_->path();
    const std::string script = (dir_ / "make_model.py").string();
    std::ofstream(script) << make_model_py;
    for (const char* python : {"python3", "/usr/bin/python3"}) {
      const std::string command =
          std::string(python) + " " + script + " " + dir_.string() + " 2>" + (dir_ / "log").string();
      const int status = std::system(command.c_str());
      if (status == 0)
        return;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      if (code != 3 && code != 127) { // 3: no torch, 127: no such interpreter
        failure_ = command + " failed (exit " + std::to_string(code) + "), see its log";
        return;
      }
    }
    skip_ = "no python3 that can import torch (install python3-torch) to write the TorchScript "
            "model this test loads";
  }
  static void TearDownTestSuite() { scratch_.reset(); }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
    auto io = torch::jit::load((dir_ / "io.pt").string());
    x_ = io.attr("x").toTensor();
    y_ = io.attr("y").toTensor();
    spec_.name = "torchscript";
    spec_.path = (dir_ / "model.pt").string();
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
