// Issue 21 items 1, 5 and 11 end to end, with real `baton run` processes:
// two runs on one checkpoint_dir (the second refused while the first lives,
// by the lock), a SIGKILLed run resumed, a finished run not resumed, a
// checkpoint of another run refused on restore, a failed run whose
// temporary checkpoints survive and whose error says how to resume, and a
// run record too big for --resume refused at start.

#include <signal.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "tests/support/baton_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;
namespace actors = baton::actors;

namespace {

class checkpoint_dir : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("checkpoint-dir"); }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::string log_of(const std::string& name) { return dir_->path() + "/" + name + ".log"; }

  static std::string run_id_in(const std::string& dir) {
    auto record = actors::read_run_record(dir);
    return record ? record->run_id : std::string{};
  }

  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// The tester's case: run B (another seed, a fault) started on the
// checkpoint_dir of a live run A restored A's state and exited 0 with A's
// weights. B is refused while A lives (A is stopped with SIGSTOP, so that it
// surely lives); A, SIGKILLed, is not taken over by a new run, and its
// --resume ends with the weights of A's fault-free run; once it finished,
// --resume refuses it and a new run replaces its checkpoints.
TEST_F(checkpoint_dir, a_live_run_holds_its_directory_and_a_killed_one_resumes) {
  auto checkpoints = dir_->path() + "/shared";
  auto job = with(short_pipeline_job(3), {"--set", "runtime.checkpoint_dir=" + checkpoints});
  auto clean = run_job(*dir_, short_pipeline_job(3), "clean");

  baton_process a{job, log_of("run-a")};
  // stage2 checkpoints a step first, stage0 last: with its step 8 written,
  // every stage has step 4.
  ASSERT_TRUE(a.await_file(checkpoints + "/stage2/step-000000000008.ckpt", std::chrono::minutes(5)))
    << a.output();
  ::kill(a.pid(), SIGSTOP);
  auto a_id = run_id_in(checkpoints);
  ASSERT_EQ(a_id.size(), 32u);

  auto b = run_baton(with(job, {"--set", "seed=7", "--fault", "kind=throw,actor=stage1,at_step=6"}));
  EXPECT_EQ(b.exit_code, 2) << b.text;
  EXPECT_TRUE(contains(b.text, "checkpoint directory " + checkpoints +
                                 " is in use by a live run (pid " + std::to_string(a.pid()) +
                                 " host "))
    << b.text;
  EXPECT_EQ(run_id_in(checkpoints), a_id) << "B overwrote A's run.yaml";

  ::kill(a.pid(), SIGKILL);
  a.wait();
  auto fresh = run_baton(job);
  EXPECT_EQ(fresh.exit_code, 2) << fresh.text;
  EXPECT_TRUE(contains(fresh.text, "holds the checkpoints of run " + a_id + ", which did not "
                                   "finish"))
    << fresh.text;
  EXPECT_TRUE(contains(fresh.text, "`baton run --resume " + checkpoints + "`")) << fresh.text;

  auto resumed = run_job(*dir_, {"run", "--resume", checkpoints}, "resumed");
  EXPECT_EQ(digests_by_actor(resumed), digests_by_actor(clean));
  EXPECT_FALSE(digests_by_actor(clean).empty());

  auto again = run_baton({"run", "--resume", checkpoints});
  EXPECT_EQ(again.exit_code, 2) << again.text;
  EXPECT_TRUE(contains(again.text, "run " + a_id + " finished (its newest checkpoint is of "
                                   "step 48; metrics in " + dir_->path() + "/resumed.json"))
    << again.text;

  auto replaced = run_baton(job);
  EXPECT_EQ(replaced.exit_code, 0) << replaced.text;
  EXPECT_TRUE(contains(replaced.text, "checkpoints of run " + a_id + ", which finished"))
    << replaced.text;
  EXPECT_NE(run_id_in(checkpoints), a_id);
}

// A checkpoint directory whose checkpoints another run wrote (here: copied
// under the record of another run id): --resume refuses it, naming the file
// and both ids, instead of training on that state. The failed run's own
// error said where its checkpoints are and how to resume.
TEST_F(checkpoint_dir, a_checkpoint_of_another_run_is_refused_on_restore) {
  auto first = dir_->path() + "/first";
  auto failed = run_baton(with(short_pipeline_job(),
                               {"--set", "runtime.checkpoint_dir=" + first, "--set",
                                "runtime.max_restarts=0", "--fault",
                                "kind=throw,actor=stage1,at_step=9"}));
  EXPECT_EQ(failed.exit_code, 1) << failed.text;
  EXPECT_TRUE(contains(failed.text, "its checkpoints are kept in " + first +
                                      ": continue the run with `baton run --resume " + first +
                                      "`"))
    << failed.text;
  auto first_id = run_id_in(first);
  ASSERT_EQ(first_id.size(), 32u);

  auto other = dir_->path() + "/other";
  fs::copy(first, other, fs::copy_options::recursive);
  auto record = actors::read_run_record(other);
  ASSERT_TRUE(record);
  record->run_id = std::string(32, 'f');
  ASSERT_FALSE(actors::write_run_record(other, *record));

  auto resumed = run_baton({"run", "--resume", other});
  EXPECT_EQ(resumed.exit_code, 2) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, other + "/stage")) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "/step-000000000008.ckpt is a checkpoint of run " +
                                       first_id + ", not of this run (" + record->run_id + ")"))
    << resumed.text;
  EXPECT_FALSE(contains(resumed.text, "epoch 1")) << "it trained";
}

// Issue 21 item 5: a failed run removed its temporary checkpoint directory,
// so it could not be resumed. It is kept, the error gives the command, and
// the command (over node processes) continues the run.
TEST_F(checkpoint_dir, a_failed_run_keeps_its_temporary_checkpoints) {
  auto tmp = dir_->path() + "/tmp";
  fs::create_directory(tmp);
  scoped_tmpdir scoped{tmp};
  auto failed = run_baton(with(short_pipeline_job(), {"--local-nodes", "2", "--set",
                                                      "runtime.max_restarts=0", "--fault",
                                                      "kind=throw,actor=stage1,at_step=9"}));
  EXPECT_EQ(failed.exit_code, 1) << failed.text;
  std::string kept;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().filename().string().rfind("baton-checkpoints-", 0) == 0)
      kept = e.path().string();
  ASSERT_FALSE(kept.empty()) << failed.text;
  EXPECT_TRUE(fs::exists(fs::path(kept) / "stage2" / "step-000000000008.ckpt"));
  auto command = "baton run --resume " + kept;
  ASSERT_TRUE(contains(failed.text, "`" + command + "`")) << failed.text;

  auto resumed = run_baton({"run", "--resume", kept, "--local-nodes", "2"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "resuming run " + run_id_in(kept) + " from step 8"))
    << resumed.text;
}

// Issue 21 item 11: 300 `--set data.dir=<4000 chars>` wrote a 1.2 MB
// run.yaml that its own --resume refused. Such a run is refused at start,
// before it trains (the arguments are too long for a shell: started
// directly).
TEST_F(checkpoint_dir, a_record_too_big_for_resume_is_refused_at_start) {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  while (data_dir.size() < 3998)
    data_dir += "/.";
  auto args =
    with(short_pipeline_job(), {"--set", "runtime.checkpoint_dir=" + dir_->path() + "/big"});
  for (int i = 0; i < 300; ++i)
    args.insert(args.end(), {"--set", "data.dir=" + data_dir});
  baton_process run{args, log_of("big")};
  EXPECT_EQ(run.wait(), 2) << run.output();
  auto text = run.output();
  EXPECT_TRUE(contains(text, "over the 1 MiB that `baton run --resume` reads")) << text;
  EXPECT_FALSE(fs::exists(dir_->path() + "/big/run.yaml")) << text;
}

// A run record over the size resume reads is refused unread, and the
// refusal names what the file is (it said "a config file" of every bounded
// file baton reads).
TEST_F(checkpoint_dir, a_run_record_too_big_to_read_is_refused_naming_it) {
  auto dir = dir_->path() + "/huge-record";
  fs::create_directories(dir);
  std::ofstream{actors::run_record_path(dir)} << std::string(actors::max_record_bytes + 1, '#');
  auto record = actors::read_run_record(dir);
  ASSERT_FALSE(record);
  const auto text = baton::describe(record.error());
  EXPECT_TRUE(contains(text, "cannot read the run record: 1048577 bytes, more than the 1048576 "
                             "(1 MiB) a run record may have"))
    << text;
}

// Issue 32 item 2: DIR/run.lock as a symbolic link made a run truncate and
// overwrite the file it points to, with exit 0; DIR/run.yaml as one was
// replaced silently. Both are refused before anything trains (exit 2,
// naming the link) and the target is untouched. What held must still hold:
// a checkpoint directory that is itself a link (the user's choice) works.
TEST_F(checkpoint_dir, a_symbolic_link_in_the_checkpoint_directory_is_refused) {
  auto checkpoints = dir_->path() + "/linked-files";
  fs::create_directory(checkpoints);
  auto victim = dir_->path() + "/victim";
  std::ofstream{victim} << "precious\n";
  auto job = with(short_pipeline_job(1), {"--set", "runtime.checkpoint_dir=" + checkpoints});

  fs::create_symlink(victim, checkpoints + "/run.lock");
  auto lock = run_baton(job);
  EXPECT_EQ(lock.exit_code, 2) << lock.text;
  EXPECT_TRUE(contains(lock.text, "cannot take the lock file " + checkpoints + "/run.lock of "
                                  "checkpoint directory " + checkpoints + ": cannot write '" +
                                  checkpoints + "/run.lock': it is a symbolic link (to '" +
                                  victim + "')"))
    << lock.text;
  EXPECT_FALSE(contains(lock.text, "epoch 1")) << "it trained";
  EXPECT_EQ(read_text(victim), "precious\n");
  fs::remove(checkpoints + "/run.lock");

  fs::create_symlink(victim, checkpoints + "/run.yaml");
  auto record = run_baton(job);
  EXPECT_EQ(record.exit_code, 2) << record.text;
  EXPECT_TRUE(contains(record.text, "cannot write '" + checkpoints + "/run.yaml': it is a "
                                    "symbolic link"))
    << record.text;
  EXPECT_FALSE(contains(record.text, "epoch 1")) << "it trained";
  EXPECT_EQ(read_text(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(checkpoints + "/run.yaml"));

  auto real = dir_->path() + "/real";
  fs::create_directory(real);
  fs::create_directory_symlink(real, dir_->path() + "/link-to-real");
  auto through = run_baton(with(short_pipeline_job(1),
                                {"--set", "runtime.checkpoint_dir=" + dir_->path() +
                                            "/link-to-real"}));
  EXPECT_EQ(through.exit_code, 0) << through.text;
  EXPECT_TRUE(fs::exists(real + "/stage0/step-000000000016.ckpt")) << through.text;
}

// Issue 32 item 16: a new run on a finished run's directory deleted every
// step-*.ckpt of every subdirectory, a user's own files among them. Only
// the finished run's checkpoints go: in the directories it made, carrying
// its run id; a copy of one in a folder of the user's stays too.
TEST_F(checkpoint_dir, a_new_run_removes_only_the_finished_runs_own_checkpoints) {
  auto checkpoints = dir_->path() + "/taken-over";
  auto job = with(short_pipeline_job(1), {"--set", "runtime.checkpoint_dir=" + checkpoints});
  auto first = run_baton(job);
  ASSERT_EQ(first.exit_code, 0) << first.text;
  auto first_id = run_id_in(checkpoints);
  auto own = checkpoints + "/stage0/step-000000000008.ckpt";
  ASSERT_TRUE(fs::exists(own)) << first.text;
  fs::create_directory(checkpoints + "/mine");
  std::ofstream{checkpoints + "/mine/step-000000000001.ckpt"} << "my notes\n";
  fs::create_directory(checkpoints + "/backup");
  fs::copy_file(own, checkpoints + "/backup/step-000000000008.ckpt");

  auto second = run_baton(with(job, {"--set", "runtime.checkpoint_every=5"}));
  EXPECT_EQ(second.exit_code, 0) << second.text;
  EXPECT_TRUE(contains(second.text, "removed 9 checkpoints of run " + first_id +
                                      ", which finished (step 16); kept 2 step-*.ckpt files "
                                      "that are not its own"))
    << second.text;
  EXPECT_FALSE(fs::exists(own)) << "the finished run's checkpoint of step 8 is left";
  EXPECT_EQ(read_text(checkpoints + "/mine/step-000000000001.ckpt"), "my notes\n");
  EXPECT_TRUE(fs::exists(checkpoints + "/backup/step-000000000008.ckpt"));
}

// Issue 32 item 21: `--resume DIR` dropped the first run's --metrics-out,
// --curves and --save-model (the docs say it needs nothing else). They are
// recorded in run.yaml and written by the resumed run; a flag given with
// --resume wins over the recorded one.
TEST_F(checkpoint_dir, a_resumed_run_writes_the_outputs_of_its_first_command) {
  auto checkpoints = dir_->path() + "/outputs";
  auto out = dir_->path() + "/outputs-";
  auto failed = run_baton(with(short_pipeline_job(1),
                               {"--set", "runtime.checkpoint_dir=" + checkpoints, "--set",
                                "runtime.max_restarts=0", "--fault",
                                "kind=throw,actor=stage1,at_step=9", "--metrics-out",
                                out + "m.json", "--curves", out + "c.csv", "--save-model",
                                out + "model.pt"}));
  ASSERT_EQ(failed.exit_code, 1) << failed.text;
  ASSERT_FALSE(fs::exists(out + "m.json"));
  auto record = actors::read_run_record(checkpoints);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->curves_file, out + "c.csv");

  auto resumed = run_baton({"run", "--resume", checkpoints, "--metrics-out", out + "m2.json"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "writes the outputs of the run as it was started: --curves " +
                                       out + "c.csv, --save-model " + out + "model.pt"))
    << resumed.text;
  EXPECT_FALSE(fs::exists(out + "m.json")) << "the recorded --metrics-out won over the flag";
  EXPECT_FALSE(read_json(out + "m2.json").is_discarded()) << resumed.text;
  EXPECT_TRUE(contains(read_text(out + "c.csv"), "epoch")) << resumed.text;
  EXPECT_GT(fs::file_size(out + "model.pt"), 0u) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "model saved to " + out + "model.pt")) << resumed.text;
}

// A refused --resume wrote its run.yaml and run.lock into the directory it
// refused (making one for a mistyped name), and the right command was then
// refused for that record's settings: nothing is written before the
// directory is known to hold a run.
TEST_F(checkpoint_dir, a_refused_resume_leaves_the_directory_as_it_was) {
  const auto empty = dir_->path() + "/empty";
  fs::create_directory(empty);
  auto refused = run_baton({"run", "--resume", empty});
  EXPECT_EQ(refused.exit_code, 2) << refused.text;
  EXPECT_TRUE(contains(refused.text, "holds no run to continue")) << refused.text;
  EXPECT_TRUE(fs::is_empty(empty));

  const auto missing = dir_->path() + "/missing";
  auto absent = run_baton({"run", "--resume", missing});
  EXPECT_EQ(absent.exit_code, 2) << absent.text;
  EXPECT_TRUE(contains(absent.text, "no such directory")) << absent.text;
  EXPECT_FALSE(fs::exists(missing));

  // A record that is not one is refused by what is wrong, not yaml-cpp's words.
  const auto scalar = dir_->path() + "/scalar";
  fs::create_directory(scalar);
  std::ofstream(scalar + "/run.yaml") << "just a line\n";
  auto odd = run_baton({"run", "--resume", scalar});
  EXPECT_EQ(odd.exit_code, 2) << odd.text;
  EXPECT_TRUE(contains(odd.text, "not a run record written by baton (not a map of keys)"))
    << odd.text;
}

// A run resumed with --resume judged the epochs after its restart only: the
// first of them was "the best" (its weights saved by --save-model with save:
// best), and early stopping counted its patience from there, so the run
// trained on past the epoch where its uninterrupted twin stopped. The epochs
// judged and the best epoch's weights are kept in the checkpoint directory:
// here the run fails in epoch 4 (best: epoch 3, its end not replayed by the
// restore) and, resumed, stops after epoch 4 as the twin does and saves the
// twin's model, byte for byte.
TEST_F(checkpoint_dir, a_resumed_run_keeps_its_best_epoch_and_its_early_stopping) {
  const auto out = dir_->path() + "/best-";
  const auto checkpoints = out + "checkpoints";
  const std::vector<std::string> job{
    "run", source_path("configs/pipeline.yaml"), "--set", "pipeline.schedule=gpipe", "--set",
    "data.microbatches=4", "--set", "data.validation=0.1", "--set", "data.epochs=6", "--set",
    "data.train_limit=2048", "--set", "data.test_limit=500", "--set",
    "early_stopping={patience: 1}"};
  auto twin = run_baton(with(job, {"--save-model", out + "twin.pt"}));
  ASSERT_EQ(twin.exit_code, 0) << twin.text;
  ASSERT_TRUE(contains(twin.text, "stopped after epoch 4: stage2 had 1 epoch without a higher "
                                  "validation accuracy than epoch 3's"))
    << twin.text;

  // 29 steps an epoch: step 100 is in epoch 4, after the checkpoint of step 95.
  auto failed = run_baton(
    with(job, {"--set", "runtime.checkpoint_every=5", "--set", "runtime.max_restarts=0", "--set",
               "runtime.checkpoint_dir=" + checkpoints, "--fault",
               "kind=throw,actor=stage1,at_step=100", "--save-model", out + "resumed.pt"}));
  ASSERT_EQ(failed.exit_code, 1) << failed.text;
  auto resumed = run_baton({"run", "--resume", checkpoints});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "3 epoch(s) judged before the restart")) << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "stopped after epoch 4: stage2 had 1 epoch without a "
                                     "higher validation accuracy than epoch 3's"))
    << resumed.text;
  EXPECT_TRUE(contains(resumed.text, "stage2: best epoch 3 by validation accuracy"))
    << resumed.text;
  EXPECT_FALSE(contains(resumed.text, "epoch 5 stage2")) << resumed.text;
  EXPECT_EQ(read_text(out + "resumed.pt"), read_text(out + "twin.pt"));
}
