#include "model/core/training_checkpoint.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/error.hpp"
#include "model/core/stage_trainer.hpp"
#include "model/core/task.hpp"
#include "model/core/training.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/tiny_model.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using namespace baton::model;
using baton::model::testing::spec_of;

namespace {

class training_checkpoint : public ::testing::Test {
protected:
  scratch_dir scratch_{"training-checkpoint"};
  const fs::path dir_ = scratch_.path();
};

training_state sample_state(int64_t version) {
  training_state s;
  s.version = version;
  s.tensors = {{"fc.weight", torch::full({2, 3}, static_cast<float>(version))},
               {"bn.num_batches_tracked", torch::tensor(version, torch::kInt64)}};
  s.counters = R"({"trained":)" + std::to_string(version) + "}";
  return s;
}

layered_model model_of(const std::string& name) {
  return make_model(spec_of(name, 7));
}

std::vector<std::pair<at::Tensor, at::Tensor>> batches(int n) {
  auto gen = at::detail::createCPUGenerator(5);
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  for (int i = 0; i < n; ++i)
    out.emplace_back(at::randn({8, 256}, gen), at::randint(0, 10, {8}, gen));
  return out;
}

/// Flips one byte in the middle of `path`.
void corrupt(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  auto middle = f.tellg() / 2;
  f.seekg(middle);
  char c = 0;
  f.get(c);
  f.seekp(middle);
  f.put(static_cast<char>(c ^ 0x5a));
}

} // namespace

TEST_F(training_checkpoint, round_trip_keeps_the_newest_files) {
  checkpoint_store store{(dir_ / "stage0").string(), 2};
  for (int64_t v : {2, 4, 6})
    store.save(sample_state(v));
  EXPECT_EQ(store.valid_steps(), (std::vector<int64_t>{4, 6}));
  auto s = store.load(6);
  EXPECT_EQ(s.version, 6);
  EXPECT_EQ(s.counters, R"({"trained":6})");
  EXPECT_TRUE(torch::equal(s.at("fc.weight"), torch::full({2, 3}, 6.0f)));
  EXPECT_EQ(s.at("bn.num_batches_tracked").item<int64_t>(), 6);
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "stage0"), fs::directory_iterator{}), 2);
}

// A writer SIGKILLed during a save leaves its temporary file: the next save
// of the actor (its restart, or a --resume) removes it.
TEST_F(training_checkpoint, a_save_removes_what_a_killed_writer_left) {
  checkpoint_store store{(dir_ / "stage1").string(), 3};
  store.save(sample_state(2));
  const fs::path stale = dir_ / "stage1" / "step-000000000004.ckpt.tmp.4711.0";
  std::ofstream(stale) << "half a checkpoint";
  const fs::path other = dir_ / "stage1" / "notes.txt";
  std::ofstream(other) << "not ours";
  store.save(sample_state(4));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(other)) << "only the store's own temporary files are removed";
  EXPECT_EQ(store.valid_steps(), (std::vector<int64_t>{2, 4}));
}

// Issue 9: the version read back modulo 256 (step 300 as 44), so no
// checkpoint of a run longer than 255 steps could be restored.
TEST_F(training_checkpoint, steps_beyond_one_and_two_bytes_round_trip) {
  checkpoint_store store{(dir_ / "long").string(), 8};
  const std::vector<int64_t> steps{255, 256, 280, 300, 65535, 65536, 70000,
                                   int64_t{999'999'999'999}, int64_t{1} << 40};
  for (auto v : steps)
    store.save(sample_state(v));
  EXPECT_EQ(store.valid_steps(), std::vector<int64_t>(steps.begin() + 1, steps.end()));
  for (auto v : {int64_t{300}, int64_t{70000}, int64_t{1} << 40}) {
    auto s = store.load(v);
    EXPECT_EQ(s.version, v);
    EXPECT_EQ(s.at("bn.num_batches_tracked").item<int64_t>(), v);
  }
  EXPECT_EQ(store.load_newest(299)->version, 280);
}

TEST_F(training_checkpoint, corrupt_and_truncated_files_are_detected_and_skipped) {
  checkpoint_store store{dir_.string()};
  for (int64_t v : {1, 2, 3})
    store.save(sample_state(v));
  corrupt(store.path_of(3));
  fs::resize_file(store.path_of(2), fs::file_size(store.path_of(2)) - 7);
  EXPECT_EQ(store.valid_steps(), (std::vector<int64_t>{1}));
  try {
    store.load(3);
    ADD_FAILURE() << "a corrupt checkpoint loaded";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
  try {
    store.load(2);
    ADD_FAILURE() << "a truncated checkpoint loaded";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::vector<std::string> skipped;
  auto newest = store.load_newest(3, &skipped);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->version, 1);
  EXPECT_EQ(skipped.size(), 2u);
  EXPECT_FALSE(store.load_newest(0).has_value());
}

// A stage restored from its checkpoint continues exactly as the stage that
// saved it: same weights after further steps (momentum included).
TEST_F(training_checkpoint, a_restored_stage_continues_bit_for_bit) {
  auto data = batches(6);
  optimizer_spec sgd{0.05, 0.9, 1e-4};
  stage_trainer original{model_of("head"), sgd, stash_mode::stash};
  auto train = [&](stage_trainer& t, int from, int to) {
    for (int i = from; i < to; ++i) {
      t.forward(i, data[i].first, true);
      t.backward_loss(i, data[i].second, 1);
      t.step();
    }
  };
  train(original, 0, 3);
  checkpoint_store store{dir_.string()};
  store.save(original.save_state());
  train(original, 3, 6);

  stage_trainer resumed{model_of("head"), sgd, stash_mode::stash};
  resumed.restore(store.load(3));
  EXPECT_EQ(resumed.version(), 3);
  train(resumed, 3, 6);
  EXPECT_EQ(weights_digest(resumed.layers()), weights_digest(original.layers()));
}

TEST_F(training_checkpoint, a_restored_head_continues_bit_for_bit) {
  auto data = batches(6);
  optimizer_spec sgd{0.05, 0.9, 1e-4};
  auto all10 = make_task("all10", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  head_trainer original{model_of("head"), all10, sgd};
  for (int i = 0; i < 3; ++i)
    original.train(data[i].first, data[i].second, 1, true);
  checkpoint_store store{dir_.string()};
  store.save(original.save_state());
  for (int i = 3; i < 6; ++i)
    original.train(data[i].first, data[i].second, 1, true);

  head_trainer resumed{model_of("head"), all10, sgd};
  resumed.restore(store.load(3));
  for (int i = 3; i < 6; ++i)
    resumed.train(data[i].first, data[i].second, 1, true);
  EXPECT_EQ(weights_digest(resumed.model()), weights_digest(original.model()));
  EXPECT_EQ(resumed.version(), 6);
}

// AdamW's state (both moments; the step count is the version) goes with the
// checkpoint: a stage and a head resumed from it continue bit for bit, with
// clipping and a schedule. An SGD checkpoint has no second moment: an adamw
// stage refuses it, naming the tensor.
TEST_F(training_checkpoint, a_restored_adamw_stage_and_head_continue_bit_for_bit) {
  auto data = batches(6);
  optimizer_spec adamw;
  adamw.name = "adamw";
  adamw.lr = 0.01;
  adamw.momentum = 0;
  adamw.weight_decay = 0.01;
  adamw.schedule = "cosine";
  adamw.warmup_epochs = 1;
  adamw.clip_grad_norm = 0.5;
  auto train = [&](stage_trainer& t, int from, int to) {
    for (int i = from; i < to; ++i) {
      t.forward(i, data[i].first, true);
      t.backward_loss(i, data[i].second, 1);
      t.step();
    }
  };
  stage_trainer original{model_of("head"), adamw, stash_mode::stash};
  original.set_schedule(2, 3);
  train(original, 0, 3);
  checkpoint_store store{(dir_ / "stage").string()};
  store.save(original.save_state());
  train(original, 3, 6);
  stage_trainer resumed{model_of("head"), adamw, stash_mode::stash};
  resumed.set_schedule(2, 3);
  resumed.restore(store.load(3));
  train(resumed, 3, 6);
  EXPECT_EQ(weights_digest(resumed.layers()), weights_digest(original.layers()));

  stage_trainer sgd{model_of("head"), optimizer_spec{}, stash_mode::stash};
  train(sgd, 0, 1);
  try {
    original.restore(sgd.save_state());
    ADD_FAILURE() << "an sgd checkpoint was restored into an adamw stage";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("second."), std::string::npos) << e.what();
  }

  auto all10 = make_task("all10", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  head_trainer head{model_of("head"), all10, adamw};
  head.set_schedule(2, 3);
  for (int i = 0; i < 3; ++i)
    head.train(data[i].first, data[i].second, 1, true);
  checkpoint_store heads{(dir_ / "head").string()};
  heads.save(head.save_state());
  for (int i = 3; i < 6; ++i)
    head.train(data[i].first, data[i].second, 1, true);
  head_trainer again{model_of("head"), all10, adamw};
  again.set_schedule(2, 3);
  again.restore(heads.load(3));
  for (int i = 3; i < 6; ++i)
    again.train(data[i].first, data[i].second, 1, true);
  EXPECT_EQ(weights_digest(again.model()), weights_digest(head.model()));
}

TEST_F(training_checkpoint, a_checkpoint_of_another_model_changes_nothing) {
  optimizer_spec sgd{0.05, 0.9, 0};
  stage_trainer stage{model_of("head"), sgd, stash_mode::stash};
  auto before = weights_digest(stage.layers());
  EXPECT_THROW(stage.restore(sample_state(4)), error);
  EXPECT_EQ(weights_digest(stage.layers()), before);
  EXPECT_EQ(stage.version(), 0);
}
