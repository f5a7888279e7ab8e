// An actor's failure ends the run with the error it reported (issue 10
// item 7): a LibTorch error in a head is compute_failed, not actor_failed.

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/script.h>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

/// Saves a TorchScript backbone of two children (a flatten of the whole
/// batch into one row, then identity) to `path`: its width, measured on one
/// sample when it is loaded, is 784, but a minibatch of 16 comes out as one
/// row of 16 x 784 features, so LibTorch refuses a head's first forward.
void write_wrong_width_backbone(const std::string& path) {
  torch::jit::Module flatten("flatten_layer");
  flatten.define("def forward(self, x):\n    return x.reshape(1, -1)\n");
  torch::jit::Module same("identity_layer");
  same.define("def forward(self, x):\n    return x\n");
  torch::jit::Module backbone("wrong_width_backbone");
  backbone.register_module("flatten", flatten);
  backbone.register_module("same", same);
  backbone.define("def forward(self, x):\n    return self.same.forward(self.flatten.forward(x))\n");
  backbone.save(path);
}

} // namespace

TEST(actor_failure, a_libtorch_error_in_a_head_ends_the_run_as_compute_failed) {
  scratch_dir dir{"actor-failure"};
  auto model = dir.path() + "/backbone.pt";
  write_wrong_width_backbone(model);
  auto topology = dir.path() + "/wrong-width.yaml";
  std::ofstream{topology} << R"(job: transfer
data: {dataset: synthetic, synthetic_train: 64, synthetic_test: 32, batch_size: 16}
backbone: {model: torchscript, path: )" << model << R"(, checkpoint: "", split: [flatten]}
tasks:
  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
heads:
  - {name: all10, task: all10}
)";
  auto out = run_baton_bounded({"run", topology}, 120, 0);
  EXPECT_EQ(out.exit_code, 1) << out.text; // a failed run, not bad input
  EXPECT_NE(out.text.find("compute_failed: all10: training on microbatch "),
            std::string::npos)
    << out.text;
  EXPECT_EQ(out.text.find("actor_failed: all10"), std::string::npos) << out.text;
}
