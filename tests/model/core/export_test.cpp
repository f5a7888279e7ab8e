// model/core/export.hpp: a layered model written as a TorchScript module
// computes what baton's model computes in evaluation mode, after a round
// trip through the file, and the file is a checkpoint load_checkpoint reads.
// (tests/modes/export_python_test.cpp runs the files in Python.)

#include "model/core/export.hpp"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "model/ist_mlp/mlp.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/tiny_model.hpp"

using baton::testing::scratch_dir;
using namespace baton::model;
using baton::model::testing::spec_of;
using baton::model::testing::tiny_norm;
using baton::model::testing::tiny_norm_model;

namespace {

class export_model_test : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return scratch_.path() + "/" + name; }

  /// m's evaluation output on x, and that of its export loaded back from a file.
  std::pair<at::Tensor, at::Tensor> outputs(layered_model m, const at::Tensor& x,
                                            const export_options& options = {}) {
    const auto file = path("model.pt");
    export_model(m, file, options);
    auto loaded = torch::jit::load(file);
    torch::NoGradGuard no_grad;
    m.train(false);
    return {m.forward(x), loaded.forward({x}).toTensor()};
  }

  scratch_dir scratch_{"export"};
};

/// A model whose batch norm has running statistics that differ from the
/// initial ones: evaluation reads them.
layered_model with_trained_statistics(layered_model m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  m.train(true);
  for (int i = 0; i < 3; ++i)
    m.forward(x * (i + 1));
  return m;
}

} // namespace

TEST_F(export_model_test, convnet_with_classifier_computes_the_same_outputs) {
  auto m = make_model(spec_of("convnet", 1));
  auto x = torch::randn({5, 1, 28, 28});
  auto [expected, exported] = outputs(m, x);
  EXPECT_TRUE(torch::equal(expected, exported)) << (expected - exported).abs().max();
}

TEST_F(export_model_test, resnet18_in_evaluation_mode_with_a_residual_scale) {
  auto x = torch::randn({2, 3, 32, 32});
  auto m = with_trained_statistics(make_model(spec_of("resnet18", 2)), x);
  {
    auto [expected, exported] = outputs(m, x);
    EXPECT_TRUE(torch::allclose(expected, exported, 1e-5, 1e-6))
      << (expected - exported).abs().max();
  }
  // ResIST's evaluation scales the residual branch of its partitioned blocks.
  const auto block = static_cast<size_t>(m.index_of("layer2_1"));
  ASSERT_TRUE(set_residual_scale(m.layers()[block], 0.5));
  auto [scaled, exported] = outputs(m, x, {"", {{"layer2_1", 0.5}}});
  set_residual_scale(m.layers()[block], 1.0);
  EXPECT_TRUE(torch::allclose(scaled, exported, 1e-5, 1e-6)) << (scaled - exported).abs().max();
  auto [plain, unscaled] = outputs(m, x);
  EXPECT_FALSE(torch::allclose(plain, exported, 1e-5, 1e-6));
}

TEST_F(export_model_test, batch_norm_with_and_without_running_statistics) {
  auto x = torch::randn({8, 1, 28, 28});
  for (auto norm : {tiny_norm::running, tiny_norm::batch_only}) {
    auto m = with_trained_statistics(tiny_norm_model(norm), x);
    auto [expected, exported] = outputs(m, x);
    EXPECT_TRUE(torch::allclose(expected, exported, 1e-5, 1e-6))
      << (expected - exported).abs().max();
  }
  auto spec = spec_of("ist_mlp", 3);
  spec.hidden = {16, 8};
  auto [expected, exported] = outputs(ist::make_mlp(spec), x);
  EXPECT_TRUE(torch::allclose(expected, exported, 1e-5, 1e-6));
}

TEST_F(export_model_test, the_export_is_a_checkpoint_with_the_model_keys) {
  auto saved = make_model(spec_of("resnet18", 4));
  export_model(saved, path("resnet.pt"));
  auto loaded = make_model(spec_of("resnet18", 5));
  ASSERT_NE(weights_digest(loaded), weights_digest(saved));
  load_checkpoint(loaded, path("resnet.pt"));
  EXPECT_EQ(weights_digest(loaded), weights_digest(saved));
  // A backbone loads from the export of a larger model, as from a checkpoint.
  auto whole = make_model(spec_of("convnet", 6));
  export_model(whole, path("convnet.pt"));
  auto front = make_model(spec_of("convnet", 7)).slice(0, 5);
  load_checkpoint(front, path("convnet.pt"));
  EXPECT_EQ(weights_digest(front), weights_digest(whole.slice(0, 5)));
}

TEST_F(export_model_test, a_backbone_and_heads_give_a_dictionary_of_logits) {
  auto backbone = make_model(spec_of("convnet", 8));
  auto head = spec_of("head", 9, 3);
  std::vector<named_model> heads{{"all10", make_model(spec_of("head", 10))},
                                 {"groups-3", make_model(head)}};
  save_module(script_module(backbone, {}, heads), path("transfer.pt"));
  auto loaded = torch::jit::load(path("transfer.pt"));
  auto x = torch::randn({4, 1, 28, 28});
  torch::NoGradGuard no_grad;
  auto out = loaded.forward({x}).toGenericDict();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& h : heads) {
    backbone.train(false);
    auto expected = h.model.forward(backbone.forward(x));
    auto got = out.at(h.name).toTensor();
    EXPECT_TRUE(torch::equal(expected, got)) << h.name;
  }
}

TEST_F(export_model_test, a_name_the_archive_cannot_hold_is_refused) {
  std::vector<named_model> heads{{"say \"hi\"", make_model(spec_of("head", 10))}};
  try {
    script_module(make_model(spec_of("convnet", 8)), {}, heads);
    FAIL() << "expected model::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot export the name 'say \"hi\"'"),
              std::string::npos)
      << e.what();
  }
}

TEST_F(export_model_test, a_layer_of_another_kind_is_refused_by_name) {
  layered_model m({{"fc", torch::nn::AnyModule(torch::nn::Linear(4, 4))},
                   {"odd", torch::nn::AnyModule(torch::nn::Softmax(1))}});
  try {
    export_model(m, path("odd.pt"));
    FAIL() << "expected model::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot export layer 'odd'"), std::string::npos)
      << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path("odd.pt")));
}
