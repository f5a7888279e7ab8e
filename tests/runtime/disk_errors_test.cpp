// Full and read-only file systems, and corrupt model files, as the real
// `baton` meets them (issue 21, items 6 and 7). `--save-model` and `baton
// pretrain` to a full file system died of SIGABRT (exit 134) with a
// `*.tmp.<pid>` file left; now they exit 2 naming the file and the cause,
// remove the temporary file and keep the previous file. A backbone with 4 KiB
// of random bytes in its middle loaded and trained to NaN (exit 0); now the
// run is refused with exit 2.
//
// A full or read-only file system is a tmpfs mounted in a mount namespace of
// the test's own (`unshare -m`: nothing stays mounted, whatever happens),
// which needs root; the full-disk cases also run for any user under a file
// size limit (`ulimit -f`, SIGXFSZ ignored), where write() fails the same way
// with EFBIG.

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

/// A short pipeline run (its --save-model is a convnet with fc2, ~1 MB).
std::vector<std::string> pipeline_job() {
  return {"run",   source_path("configs/pipeline.yaml"),
          "--set", "data.train_limit=256",
          "--set", "data.test_limit=64",
          "--set", "pipeline.schedule=gpipe"};
}

/// A short pre-training of the transfer job's backbone into `checkpoint`.
std::vector<std::string> pretrain_job(const std::string& checkpoint) {
  return {"pretrain", source_path("configs/transfer.yaml"),
          "--set",    "backbone.checkpoint=" + checkpoint,
          "--set",    "backbone.pretrain.train_limit=256",
          "--set",    "data.test_limit=64"};
}

/// Runs `baton ARGS` in `dir` prepared by `setup` (sh), then prints its exit
/// code, the files in `dir` and the content of `dir/model.pt`, so that the
/// test sees them even where `dir` is a tmpfs gone with its namespace.
std::string script(const std::string& setup, const std::string& dir,
                   const std::vector<std::string>& args) {
  return setup + "; " + baton_command(args) + "; echo \"exit=$?\"; echo \"files: $(ls -A " +
         quote(dir) + " | tr '\\n' ' ')\"; echo \"content: $(cat " + quote(dir + "/model.pt") +
         " 2>/dev/null)\"";
}

/// `script` in a mount namespace with a tmpfs mounted on `dir`
/// (`options`), made by this test's process when it is root.
command_output in_tmpfs(const std::string& dir, const std::string& options,
                        const std::string& commands) {
  return run_shell("unshare -m sh -c " +
                   quote("mount -t tmpfs -o " + options + " tmpfs " + quote(dir) +
                         " || { echo 'cannot mount a tmpfs'; exit 99; }; " + commands) +
                   " 2>&1");
}

/// The value after "key=" or "key: " on its own line of `text`.
std::string field(const std::string& text, const std::string& key) {
  auto at = text.rfind("\n" + key);
  if (at == std::string::npos)
    return "<no " + key + ">";
  at += key.size() + 1;
  return text.substr(at, text.find('\n', at) - at);
}

/// Overwrites 4 KiB in the middle of `path` with seeded random bytes.
void corrupt_middle(const std::string& path) {
  const auto size = fs::file_size(path);
  std::fstream file{path, std::ios::binary | std::ios::in | std::ios::out};
  file.seekp(static_cast<std::streamoff>(size / 2 - 2048));
  std::mt19937 random{21};
  for (int i = 0; i < 4096; ++i)
    file.put(static_cast<char>(random() & 0xff));
}

class disk_errors : public ::testing::Test {
protected:
  void need_root() {
    if (::geteuid() != 0)
      GTEST_SKIP() << "needs root to mount a tmpfs in a mount namespace (the file-size-limit "
                      "cases cover full disks for any user)";
  }

  /// Checks the end of a write that failed with `cause`: exit 2, the file
  /// and the cause named, no temporary file, `files` left as they were.
  static void expect_clean_failure(const command_output& out, const std::string& path,
                                   const std::string& cause, const std::string& files) {
    EXPECT_EQ(field(out.text, "exit="), "2") << out.text;
    EXPECT_NE(out.text.find("cannot write '" + path + "'"), std::string::npos) << out.text;
    EXPECT_NE(out.text.find(cause), std::string::npos) << out.text;
    EXPECT_EQ(out.text.find("terminate called"), std::string::npos) << out.text;
    EXPECT_EQ(field(out.text, "files: "), files) << out.text;
  }

  scratch_dir scratch_{"disk-errors"};
  const std::string dir_ = scratch_.path();
};

} // namespace

TEST_F(disk_errors, save_model_to_a_full_file_system_keeps_the_previous_file) {
  need_root();
  const std::string model = dir_ + "/model.pt";
  auto out = in_tmpfs(dir_, "size=64k",
                      script("printf previous > " + quote(model), dir_,
                             with(pipeline_job(), {"--save-model", model})));
  expect_clean_failure(out, model, "No space left on device", "model.pt ");
  EXPECT_EQ(field(out.text, "content: "), "previous") << out.text;
  // What was trained is still shown.
  EXPECT_NE(out.text.find("weights (sha256)"), std::string::npos) << out.text;
}

TEST_F(disk_errors, save_model_beyond_a_file_size_limit_keeps_the_previous_file) {
  const std::string model = dir_ + "/model.pt";
  auto out = run_shell(script("printf previous > " + quote(model) + "; trap '' XFSZ; ulimit -f 64",
                              dir_, with(pipeline_job(), {"--save-model", model})));
  expect_clean_failure(out, model, "File too large", "model.pt ");
  EXPECT_EQ(field(out.text, "content: "), "previous") << out.text;
}

TEST_F(disk_errors, pretrain_to_a_full_file_system_is_an_error_not_a_crash) {
  need_root();
  const std::string backbone = dir_ + "/backbone.pt";
  auto out = in_tmpfs(dir_, "size=64k", script("true", dir_, pretrain_job(backbone)));
  expect_clean_failure(out, backbone, "No space left on device", "");
}

TEST_F(disk_errors, pretrain_beyond_a_file_size_limit_is_an_error_not_a_crash) {
  const std::string backbone = dir_ + "/backbone.pt";
  auto out = run_shell(script("trap '' XFSZ; ulimit -f 64", dir_, pretrain_job(backbone)));
  expect_clean_failure(out, backbone, "File too large", "");
}

// A read-only directory is refused before anything trains (the check
// creates and removes a file there), for --save-model and for the
// pre-training's checkpoint alike.
TEST_F(disk_errors, a_read_only_directory_is_refused_before_training) {
  need_root();
  const std::string model = dir_ + "/model.pt";
  const std::string ro = "printf previous > " + quote(model) + "; mount -o remount,ro " +
                         quote(dir_);
  auto save = in_tmpfs(dir_, "size=1m", script(ro, dir_, with(pipeline_job(),
                                                               {"--save-model", model})));
  EXPECT_EQ(field(save.text, "exit="), "2") << save.text;
  EXPECT_NE(save.text.find(model), std::string::npos) << save.text;
  EXPECT_NE(save.text.find("Read-only file system"), std::string::npos) << save.text;
  EXPECT_EQ(save.text.find("weights (sha256)"), std::string::npos) << save.text;
  EXPECT_EQ(field(save.text, "content: "), "previous") << save.text;

  const std::string backbone = dir_ + "/backbone.pt";
  auto pretrain = in_tmpfs(dir_, "size=1m", script(ro, dir_, pretrain_job(backbone)));
  EXPECT_EQ(field(pretrain.text, "exit="), "2") << pretrain.text;
  EXPECT_NE(pretrain.text.find("backbone.checkpoint: cannot write '" + backbone + "'"),
            std::string::npos)
    << pretrain.text;
  EXPECT_NE(pretrain.text.find("Read-only file system"), std::string::npos) << pretrain.text;
  EXPECT_EQ(pretrain.text.find("pre-training"), std::string::npos) << pretrain.text;
}

// Issue 32 item 17: --curves to a read-only directory was found only after
// training (the other outputs were checked before). Now with them.
TEST_F(disk_errors, curves_to_a_read_only_directory_are_refused_before_training) {
  need_root();
  const std::string curves = dir_ + "/curves.csv";
  auto out = in_tmpfs(dir_, "size=1m",
                      script("mount -o remount,ro " + quote(dir_), dir_,
                             with(pipeline_job(), {"--curves", curves})));
  EXPECT_EQ(field(out.text, "exit="), "2") << out.text;
  EXPECT_NE(out.text.find("--curves " + curves + ": cannot write '" + curves + "'"),
            std::string::npos)
    << out.text;
  EXPECT_NE(out.text.find("Read-only file system"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("weights (sha256)"), std::string::npos) << "it trained first";
}

// Item 7: the backbone of the issue, with 4 KiB of random bytes in its
// middle, is refused by the actors' run (embedded and on node processes)
// and by --mode local, exit 2.
TEST_F(disk_errors, a_corrupt_backbone_is_refused) {
  const std::string backbone = dir_ + "/backbone.pt";
  auto pretrain = run_baton(pretrain_job(backbone));
  ASSERT_EQ(pretrain.exit_code, 0) << pretrain.text;
  corrupt_middle(backbone);
  std::vector<std::string> job{"run",   source_path("configs/transfer.yaml"),
                               "--set", "backbone.checkpoint=" + backbone,
                               "--set", "data.train_limit=256",
                               "--set", "data.test_limit=64"};
  for (const auto& mode : std::vector<std::vector<std::string>>{
         {}, {"--mode", "local"}, {"--local-nodes", "2"}}) {
    auto out = run_baton(with(job, mode));
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_NE(out.text.find(backbone + ": corrupt model file"), std::string::npos) << out.text;
    EXPECT_EQ(out.text.find("weights (sha256)"), std::string::npos) << out.text;
  }
}

// `baton certs init` whose certificate does not fit (a file-size limit
// that its key passes): no lone key is left, and a retry works.
TEST_F(disk_errors, certs_that_do_not_fit_leave_no_half_pair) {
  const std::string ca = dir_ + "/ca";
  auto out = run_shell(script("mkdir " + quote(ca) + "; trap '' XFSZ; ulimit -f 1", ca,
                              {"certs", "init", ca}));
  EXPECT_EQ(field(out.text, "exit="), "2") << out.text;
  EXPECT_NE(out.text.find("cannot write '" + ca + "/ca.pem'"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("File too large"), std::string::npos) << out.text;
  EXPECT_EQ(field(out.text, "files: "), "") << out.text;
  auto retry = run_baton({"certs", "init", ca});
  EXPECT_EQ(retry.exit_code, 0) << retry.text;
  EXPECT_TRUE(fs::exists(ca + "/ca.pem") && fs::exists(ca + "/ca.key"));
}

// Training checkpoints on a full file system: each failed write is an
// error naming the file and the cause, never a crash, and no temporary
// file is left among the checkpoints.
TEST_F(disk_errors, checkpoints_to_a_full_file_system_leave_no_temporary_files) {
  need_root();
  const std::string ck = dir_ + "/ck";
  auto args = with(pipeline_job(), {"--set", "runtime.checkpoint_every=2", "--set",
                                    "runtime.checkpoint_dir=" + ck});
  auto out = in_tmpfs(dir_, "size=256k",
                      baton_command(args) + "; echo \"exit=$?\"; echo \"temporary: $(find " +
                        quote(ck) + " -name '*.tmp*' | wc -l)\"");
  const auto code = field(out.text, "exit=");
  EXPECT_TRUE(code != "0" && code != "134") << out.text;
  EXPECT_NE(out.text.find("cannot write '" + ck + "/stage"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("No space left on device"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("terminate called"), std::string::npos) << out.text;
  EXPECT_EQ(field(out.text, "temporary: "), "0") << out.text;
}

// run.yaml that cannot be written: an error naming it and the cause, the
// previous record kept, no temporary file (before, a failed write left
// run.yaml.tmp). A file-size limit (SIGXFSZ ignored) in this process.
TEST_F(disk_errors, a_run_record_that_cannot_be_written_keeps_the_previous_one) {
  baton::actors::run_record record;
  record.topology_file = "/a/topology.yaml";
  record.topology_text = "job: transfer\n";
  ASSERT_FALSE(baton::actors::write_run_record(dir_, record));
  const auto path = baton::actors::run_record_path(dir_);
  const auto before = fs::file_size(path);
  record.overrides.push_back("data.dir=" + std::string(8192, 'x'));
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  auto handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = old;
  limit.rlim_cur = 4096;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  auto err = baton::actors::write_run_record(dir_, record);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, handler);
  ASSERT_TRUE(err);
  EXPECT_NE(baton::describe(err).find("cannot write '" + path + "'"), std::string::npos)
    << baton::describe(err);
  EXPECT_NE(baton::describe(err).find("File too large"), std::string::npos)
    << baton::describe(err);
  EXPECT_EQ(fs::file_size(path), before);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{fs::path(path).filename().string()});
}
