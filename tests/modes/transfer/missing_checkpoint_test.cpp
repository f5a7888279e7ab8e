// A missing or mistyped backbone.checkpoint (issue 23 item 3): the modes
// that start from a pretrained backbone (transfer, data-parallel) refuse the
// run with the key's file:line and a hint to run `baton pretrain`, and train
// nothing; only `backbone.pretrain.if_missing: pretrain` (the shipped
// transfer and fine-tune configs, so that a fresh clone's first command
// runs) pre-trains a missing checkpoint first, and says so. One that exists
// but cannot start the model (made for other data) is refused as well.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

/// Tiny data for the runs that do train.
const std::vector<std::string> tiny{"--set", "data.train_limit=128", "--set",
                                    "data.test_limit=64", "--set",
                                    "backbone.pretrain.train_limit=128"};

class missing_checkpoint : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

  /// Expects `out` to be the refusal of the missing checkpoint `file` whose
  /// key is at `where`, before anything trained.
  void expect_refused(const command_output& out, const std::string& file,
                      const std::string& where) {
    EXPECT_EQ(out.exit_code, 2) << out.text;
    for (const std::string& part : std::vector<std::string>{
           where + ": backbone.checkpoint '" + file + "' does not exist", "`baton pretrain ",
          "backbone.checkpoint: none", "backbone.pretrain.if_missing: pretrain"})
      EXPECT_TRUE(contains(out.text, part)) << part << " not in: " << out.text;
    EXPECT_FALSE(contains(out.text, "pre-training")) << out.text;
    EXPECT_FALSE(contains(out.text, "epoch 1")) << out.text;
    EXPECT_FALSE(std::filesystem::exists(file));
  }

  scratch_dir dir_{"missing-checkpoint"};
};

} // namespace

TEST_F(missing_checkpoint, a_mistyped_path_in_a_file_is_refused_at_its_line) {
  // configs/transfer.yaml as a user's copy without if_missing, its path mistyped.
  auto text = read_text(source_path("configs/transfer.yaml"));
  const auto key = text.find("  checkpoint: ");
  ASSERT_NE(key, std::string::npos);
  text.replace(key, text.find('\n', key) - key, "  checkpoint: convnet-pretrianed.pt");
  const auto pretrain = text.find("    if_missing: pretrain");
  ASSERT_NE(pretrain, std::string::npos);
  text.erase(pretrain, text.find('\n', pretrain) + 1 - pretrain);
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(key), '\n');
  const auto topology = path("mine.yaml");
  std::ofstream(topology) << text;
  const auto out = run_baton({"run", topology});
  expect_refused(out, path("convnet-pretrianed.pt"), topology + ":" + std::to_string(line));
  EXPECT_TRUE(contains(out.text, "`baton pretrain " + topology + "`")) << out.text;
}

TEST_F(missing_checkpoint, data_parallel_refuses_a_missing_checkpoint_given_by_set) {
  const auto file = path("missing.pt");
  const auto out = run_baton(
    {"run", source_path("configs/data-parallel.yaml"), "--set", "backbone.checkpoint=" + file});
  expect_refused(out, file, "--set backbone.checkpoint=" + file);
}

TEST_F(missing_checkpoint, if_missing_error_overrides_the_shipped_config) {
  const auto file = path("absent.pt");
  const auto out =
    run_baton({"run", source_path("configs/transfer.yaml"), "--set", "backbone.checkpoint=" + file,
               "--set", "backbone.pretrain.if_missing=error"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_TRUE(contains(out.text, "'" + file + "' does not exist")) << out.text;
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(missing_checkpoint, if_missing_pretrain_pretrains_first_and_says_so) {
  const auto file = path("made.pt");
  std::vector<std::string> args{"run", source_path("configs/transfer.yaml"), "--set",
                                "backbone.checkpoint=" + file};
  args.insert(args.end(), tiny.begin(), tiny.end());
  const auto out = run_baton(args);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(contains(out.text, "pre-training the backbone (convnet) on task all10 (128 "
                                 "samples, 1 epoch(s)) into " + file)) << out.text;
  EXPECT_TRUE(std::filesystem::exists(file));
  // The next run loads it: no second pre-training, and no warning (the
  // settings it was made with are the topology's).
  const auto again = run_baton(args);
  ASSERT_EQ(again.exit_code, 0) << again.text;
  EXPECT_FALSE(contains(again.text, "pre-training")) << again.text;
  EXPECT_FALSE(contains(again.text, "pre-trained with other settings")) << again.text;
  // A topology whose backbone.pretrain now says otherwise (an edited config)
  // still starts from the file, and is told which settings differ.
  args.insert(args.end(), {"--set", "backbone.pretrain.optimizer.lr=0.003"});
  const auto edited = run_baton(args);
  ASSERT_EQ(edited.exit_code, 0) << edited.text;
  EXPECT_FALSE(contains(edited.text, "pre-training")) << edited.text;
  for (const std::string& part :
       {"backbone.checkpoint " + file + " was pre-trained with other settings",
        std::string{"backbone.pretrain.optimizer.lr: "}, std::string{" -> 0.003"},
        "`baton pretrain " + source_path("configs/transfer.yaml") + "`"})
    EXPECT_TRUE(contains(edited.text, part)) << part << " not in: " << edited.text;
}

TEST_F(missing_checkpoint, a_bad_if_missing_value_is_refused) {
  const auto out = run_baton({"run", source_path("configs/transfer.yaml"), "--set",
                              "backbone.pretrain.if_missing=maybe"});
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_TRUE(contains(out.text, "if_missing")) << out.text;
  EXPECT_TRUE(contains(out.text, "pretrain")) << out.text;
}

// A checkpoint pre-trained for other data (here Fashion-MNIST's 1 channel,
// then a run on 3-channel samples) cannot start the model: refused before
// anything starts, saying what does not fit, how the file was made and what
// to do, and the file left as it was. Before, a warning said the run
// "starts from those weights" and then every stage failed as it started.
TEST_F(missing_checkpoint, a_checkpoint_made_for_other_data_is_refused_before_anything_starts) {
  const auto file = path("made.pt");
  std::vector<std::string> args{"run", source_path("configs/transfer.yaml"), "--set",
                                "backbone.checkpoint=" + file};
  args.insert(args.end(), tiny.begin(), tiny.end());
  ASSERT_EQ(run_baton(args).exit_code, 0);
  const auto made = read_text(file);
  args.insert(args.end(),
              {"--set", "data.kind=synthetic", "--set", "data.synthetic_shape=[3, 28, 28]", "--set",
               "data.synthetic_train=128", "--set", "data.synthetic_test=64"});
  const auto out = run_baton(args);
  EXPECT_EQ(out.exit_code, 2) << out.text;
  for (const std::string& part :
       {"--set backbone.checkpoint=" + file +
          ": backbone.checkpoint cannot start this run's convnet",
        std::string{"key 'conv1.weight' has shape [32, 1, 3, 3] Float, "
                    "expected [32, 3, 3, 3] Float"},
        std::string{"pre-trained with other settings: backbone.input: [1, 28, 28] -> [3, 28, 28]"},
        "`baton pretrain " + source_path("configs/transfer.yaml") + "`"})
    EXPECT_TRUE(contains(out.text, part)) << part << " not in: " << out.text;
  EXPECT_FALSE(contains(out.text, "starts from those weights")) << out.text;
  EXPECT_FALSE(contains(out.text, "refused to spawn")) << out.text;
  EXPECT_FALSE(contains(out.text, "pre-training")) << out.text;
  EXPECT_EQ(read_text(file), made);
}
