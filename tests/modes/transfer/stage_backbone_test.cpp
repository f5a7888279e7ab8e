// The stages of one process slice one frozen backbone (transfer's
// whole_backbone): built and its checkpoint read once while a stage holds
// it, built again from a checkpoint written anew.

#include <chrono>
#include <filesystem>

#include <torch/torch.h>
#include <gtest/gtest.h>

#include "actors/modes/transfer/stage.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/layered_model.hpp"
#include "tests/support/scratch_dir.hpp"

using baton::actors::transfer::stage_settings;
using baton::actors::transfer::whole_backbone;

using baton::model::weights_digest;

TEST(transfer_stage, the_stages_of_a_process_share_one_backbone_until_its_checkpoint_changes) {
  baton::testing::scratch_dir dir{"stage-backbone"};
  stage_settings spec;
  spec.backbone.name = "convnet";
  spec.checkpoint = dir.path() + "/backbone.pt";
  auto first_weights = baton::model::make_model(spec.backbone);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : first_weights.parameters())
      p.add_(1.0);
  }
  baton::model::save_checkpoint(first_weights, spec.checkpoint);

  auto a = whole_backbone(spec);
  auto b = whole_backbone(spec);
  EXPECT_EQ(a.get(), b.get()); // one build for both stages
  EXPECT_EQ(weights_digest(*a), weights_digest(first_weights));
  for (const auto& p : a->parameters())
    EXPECT_FALSE(p.requires_grad()); // frozen

  // The checkpoint written anew (another modification time): built again,
  // with the new weights, while the first build lives on for its holders.
  auto second_weights = baton::model::make_model(spec.backbone);
  baton::model::save_checkpoint(second_weights, spec.checkpoint);
  namespace fs = std::filesystem;
  const auto written = fs::last_write_time(spec.checkpoint);
  fs::last_write_time(spec.checkpoint, written + std::chrono::seconds(1));
  auto c = whole_backbone(spec);
  EXPECT_NE(c.get(), a.get());
  EXPECT_EQ(weights_digest(*c), weights_digest(second_weights));
  EXPECT_EQ(weights_digest(*a), weights_digest(first_weights));

  // Another backbone declaration is another build.
  stage_settings other = spec;
  other.checkpoint.clear();
  EXPECT_NE(whole_backbone(other).get(), c.get());
}
