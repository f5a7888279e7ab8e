// Issue 21 items 1 and 11, the parts that need no training run: a
// checkpoint belongs to one run (its id is in the file, and another run's is
// never restored, by an actor or by the coordinator choosing a step), a
// checkpoint directory is locked by one live run (an flock that dies with
// its process), a new run does not take a directory another run can still
// resume, a finished run is not resumed, and run.yaml is never written
// bigger than `--resume` reads.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "actors/roles/training_counters.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/runtime/checkpoints.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/error.hpp"
#include "model/core/training_checkpoint.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton;
using namespace baton::actors;
using baton::testing::contains;
using baton::testing::scratch_dir;
namespace fs = std::filesystem;

namespace {

class checkpoint_ownership : public ::testing::Test {
protected:
  scratch_dir scratch_{"checkpoint-ownership"};
  const std::string dir_ = scratch_.path();

  /// Writes the checkpoint of `step` of actor `actor` as run `run_id` wrote it.
  void write_checkpoint(const std::string& actor, int64_t step, const std::string& run_id) {
    model::training_state s;
    s.version = step;
    s.tensors = {{"w", torch::full({2}, static_cast<float>(step))}};
    s.run_id = run_id;
    model::checkpoint_store{checkpoint_dir_of(dir_, actor)}.save(s);
  }

  /// A record of run `run_id` with one override.
  static run_record record_of(const std::string& run_id) {
    run_record r;
    r.topology_text = "job: pipeline\n";
    r.overrides = {"seed=42"};
    r.run_id = run_id;
    return r;
  }
};

} // namespace

TEST_F(checkpoint_ownership, a_checkpoint_keeps_the_id_of_the_run_that_wrote_it) {
  write_checkpoint("stage0", 4, "run-a");
  auto back = model::checkpoint_store{checkpoint_dir_of(dir_, "stage0")}.load(4);
  EXPECT_EQ(back.run_id, "run-a");
  EXPECT_EQ(back.version, 4);
}

// The actor's side, wherever it runs (embedded or on a node): the run id
// comes in its recovery spec.
TEST_F(checkpoint_ownership, an_actor_restores_only_its_own_runs_checkpoint) {
  write_checkpoint("stage0", 4, "run-a");
  recovery_settings spec;
  spec.checkpoint_dir = checkpoint_dir_of(dir_, "stage0");
  spec.restore_step = 4;
  spec.run_id = "run-a";
  auto own = checkpointing{spec}.restore();
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->version, 4);

  spec.run_id = "run-b";
  try {
    checkpointing{spec}.restore();
    FAIL() << "run-b restored run-a's checkpoint";
  } catch (const model::file_error& e) {
    std::string what = e.what();
    EXPECT_TRUE(contains(what, "run-a")) << what;
    EXPECT_TRUE(contains(what, "run-b")) << what;
    EXPECT_TRUE(contains(what, spec.checkpoint_dir + "/step-000000000004.ckpt")) << what;
  }
}

TEST_F(checkpoint_ownership, what_an_actor_saves_carries_its_run_id) {
  recovery_settings spec;
  spec.checkpoint_dir = checkpoint_dir_of(dir_, "head");
  spec.checkpoint_every = 2;
  spec.run_id = "run-c";
  model::training_state s;
  s.version = 2;
  s.tensors = {{"w", torch::zeros({1})}};
  checkpointing{spec}.save(s, training_counters{});
  EXPECT_EQ(model::checkpoint_store{spec.checkpoint_dir}.load(2).run_id, "run-c");
}

// The coordinator's side: the step a restart or --resume continues from is
// checked to be this run's in every actor's directory.
TEST_F(checkpoint_ownership, the_coordinator_refuses_a_step_of_another_run) {
  for (const char* actor : {"stage0", "stage1"})
    for (int64_t step : {4, 8})
      write_checkpoint(actor, step, "run-a");
  checkpoint_choice choice;
  choice.dir = dir_;
  choice.run_id = "run-a";
  auto own = newest_own_step(choice, {"stage0", "stage1"});
  ASSERT_TRUE(own) << describe(own.error());
  EXPECT_EQ(*own, 8);

  write_checkpoint("stage1", 8, "run-b"); // another run wrote over it
  auto mixed = newest_own_step(choice, {"stage0", "stage1"});
  ASSERT_FALSE(mixed);
  EXPECT_TRUE(mixed.error() == errc::bad_file);
  auto why = describe(mixed.error());
  EXPECT_TRUE(contains(why, dir_ + "/stage1/step-000000000008.ckpt")) << why;
  EXPECT_TRUE(contains(why, "run run-b, not of this run (run-a)")) << why;
}

TEST_F(checkpoint_ownership, a_live_run_holds_its_directory) {
  auto first = checkpoint_lock::take(dir_, "run-a");
  ASSERT_TRUE(first) << describe(first.error());
  auto second = checkpoint_lock::take(dir_, "run-b");
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error() == errc::bad_config);
  auto why = describe(second.error());
  EXPECT_TRUE(contains(why, "checkpoint directory " + dir_ + " is in use by a live run")) << why;
  EXPECT_TRUE(contains(why, "pid " + std::to_string(::getpid()) + " host ")) << why;
  EXPECT_TRUE(contains(why, "run run-a")) << why;
  { auto released = std::move(*first); }
  EXPECT_TRUE(checkpoint_lock::take(dir_, "run-b")) << "the lock outlived its holder";
}

// The lock dies with its process: a SIGKILLed holder leaves nothing stuck.
TEST_F(checkpoint_ownership, a_killed_holder_leaves_no_lock) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = checkpoint_lock::take(dir_, "run-killed");
    char byte = lock ? 'y' : 'n';
    (void) !::write(ready[1], &byte, 1);
    for (;;)
      ::pause();
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  auto held = checkpoint_lock::take(dir_, "run-b");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_FALSE(held);
  EXPECT_TRUE(contains(describe(held.error()), "pid " + std::to_string(child) + " host "))
    << describe(held.error());
  EXPECT_TRUE(checkpoint_lock::take(dir_, "run-b")) << "a SIGKILLed run left its lock";
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(checkpoint_ownership, a_new_run_does_not_take_the_checkpoints_of_an_unfinished_one) {
  ASSERT_FALSE(write_run_record(dir_, record_of("run-a")));
  write_checkpoint("stage0", 4, "run-a");
  auto claimed = claim_checkpoint_dir(dir_, record_of("run-b"), false);
  ASSERT_FALSE(claimed);
  EXPECT_TRUE(claimed.error() == errc::bad_config);
  auto why = describe(claimed.error());
  EXPECT_TRUE(contains(why, "holds the checkpoints of run run-a, which did not finish")) << why;
  EXPECT_TRUE(contains(why, "`baton run --resume " + dir_ + "`")) << why;
  EXPECT_TRUE(fs::exists(dir_ + "/stage0/step-000000000004.ckpt"));
  // Its own --resume takes it.
  EXPECT_TRUE(claim_checkpoint_dir(dir_, record_of("run-a"), true));
}

TEST_F(checkpoint_ownership, a_finished_run_is_not_resumed_and_a_new_run_replaces_it) {
  auto finished = record_of("run-a");
  finished.finished_step = 8;
  finished.metrics_file = "/out/metrics.json";
  ASSERT_FALSE(write_run_record(dir_, finished));
  write_checkpoint("stage0", 8, "run-a");
  auto resumed = claim_checkpoint_dir(dir_, record_of("run-a"), true);
  ASSERT_FALSE(resumed);
  EXPECT_TRUE(resumed.error() == errc::bad_config);
  auto why = describe(resumed.error());
  EXPECT_TRUE(contains(why, "--resume " + dir_ + ": run run-a finished (its newest checkpoint "
                            "is of step 8; metrics in /out/metrics.json; no --save-model)"))
    << why;

  auto fresh = claim_checkpoint_dir(dir_, record_of("run-b"), false);
  ASSERT_TRUE(fresh) << describe(fresh.error());
  EXPECT_FALSE(fs::exists(dir_ + "/stage0/step-000000000008.ckpt"));
}

TEST_F(checkpoint_ownership, the_record_keeps_the_run_id_and_whether_it_finished) {
  auto record = record_of(new_run_id());
  EXPECT_EQ(record.run_id.size(), 32u);
  EXPECT_NE(record.run_id, new_run_id());
  record.finished_step = 300;
  record.model_file = "/out/model.pt";
  ASSERT_FALSE(write_run_record(dir_, record));
  auto back = read_run_record(dir_);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->run_id, record.run_id);
  EXPECT_EQ(back->finished_step, 300);
  EXPECT_EQ(back->model_file, "/out/model.pt");
  EXPECT_EQ(back->overrides, record.overrides);
}

// Item 11: 300 `--set data.dir=<4000 chars>` made a 1.2 MB run.yaml that its
// own --resume refused. A record is never written bigger than --resume
// reads; one just under the limit reads back whole.
TEST_F(checkpoint_ownership, run_yaml_is_never_bigger_than_resume_reads) {
  auto record = record_of("run-a");
  record.overrides.assign(300, "data.dir=" + std::string(4000, 'd'));
  auto refused = check_record_size(record);
  ASSERT_TRUE(refused);
  EXPECT_TRUE(refused == errc::bad_config);
  EXPECT_TRUE(contains(describe(refused), "over the 1 MiB that `baton run --resume` reads"))
    << describe(refused);
  EXPECT_TRUE(write_run_record(dir_, record));
  EXPECT_FALSE(fs::exists(run_record_path(dir_)));

  record.overrides.resize(250); // about 1,000,000 bytes
  ASSERT_FALSE(check_record_size(record));
  ASSERT_FALSE(write_run_record(dir_, record));
  EXPECT_GT(fs::file_size(run_record_path(dir_)), 1000000u);
  auto back = read_run_record(dir_);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->overrides, record.overrides);
}
