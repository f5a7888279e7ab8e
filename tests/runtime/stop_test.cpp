// Runs that must stop (issue 9, items 6, 7 and 9): a head whose thread
// cannot be created ended in a hang that ignored SIGINT and SIGTERM; now the
// run stops with an error naming the actor. A signal always ends baton: the
// first asks for a clean stop, a second one exits at once.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

using clock_type = std::chrono::steady_clock;

/// A `baton` child process with its output in a file; killed if the test
/// ends while it still runs.
class child {
public:
  /// `as_nobody`: root drops to uid/gid 65534 first, so that `nproc` (the
  /// RLIMIT_NPROC of the user's threads) applies; 0 leaves the limit alone.
  child(const std::vector<std::string>& args, const std::string& log, bool as_nobody = false,
        rlim_t nproc = 0)
    : log_(log) {
    pid_ = ::fork();
    if (pid_ != 0)
      return;
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::setpgid(0, 0);
    if (as_nobody && ::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(126);
    if (nproc > 0) {
      rlimit limit{nproc, nproc};
      ::setrlimit(RLIMIT_NPROC, &limit);
    }
    std::vector<std::string> all{BATON_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(BATON_BINARY, argv.data());
    ::_exit(127);
  }

  ~child() {
    if (pid_ > 0 && code_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  /// The exit code (128 + signal when killed), or -1 if it still runs after
  /// `limit`.
  int wait_for(std::chrono::seconds limit) {
    auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_)
        return code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  std::string output() const {
    std::ifstream in{log_};
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  /// Waits until the output contains `text` (or `limit` passes).
  bool await_output(const std::string& text, std::chrono::seconds limit) const {
    auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
      if (output().find(text) != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

private:
  pid_t pid_ = -1;
  int code_ = -1;
  std::string log_;
};

/// The transfer job on `samples` training samples with `heads` more heads
/// than its three.
std::vector<std::string> many_heads(int heads, int samples = 512) {
  std::vector<std::string> args{"run",   source_path("configs/transfer.yaml"),
                                "--set", "data.train_limit=" + std::to_string(samples),
                                "--set", "data.test_limit=128"};
  for (int i = 1; i <= heads; ++i)
    args.insert(args.end(),
                {"--set", "heads.+={name: h" + std::to_string(i) + ", task: all10}"});
  return args;
}

class stopping : public ::testing::Test {
protected:
  // Writable by uid 65534, which the thread-limit test runs as.
  void SetUp() override { fs::permissions(dir_, fs::perms::all); }

  scratch_dir scratch_{"stop"};
  const std::string dir_ = scratch_.path();
};

} // namespace

// Item 7: with the user's threads limited, head h16 or so cannot get a
// thread. The run used to hang (CAF counted the actor that never started)
// and ignore signals; now it ends with exit code 1 and names the actor.
TEST_F(stopping, a_head_that_cannot_get_a_thread_stops_the_run_with_an_error) {
  // The backbone checkpoint is made first, by this (unlimited) process.
  auto pretrain = run_baton({"pretrain", source_path("configs/transfer.yaml")});
  ASSERT_EQ(pretrain.exit_code, 0) << pretrain.text;
  auto args = many_heads(40);
  args.insert(args.end(), {"--set", "runtime.checkpoint_every=0"});
  ::setenv("TMPDIR", dir_.c_str(), 1);
  child run{args, dir_ + "/run.log", true, 30};
  ::unsetenv("TMPDIR");
  int code = run.wait_for(std::chrono::seconds(240));
  auto text = run.output();
  ASSERT_NE(code, -1) << "still running after 240 s:\n" << text;
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("cannot start its thread"), std::string::npos) << text;
}

// Items 6 and 9: a signal always ends baton. The first SIGTERM stops a
// running job cleanly (exit code 130); a second one during that stop exits
// at once.
TEST_F(stopping, signals_stop_a_run) {
  // A whole epoch: still training when the signal comes.
  child first{many_heads(0, 60000), dir_ + "/first.log"};
  ASSERT_TRUE(first.await_output("spawned head", std::chrono::seconds(120))) << first.output();
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait_for(std::chrono::seconds(120)), 130) << first.output();

  child second{many_heads(0, 60000), dir_ + "/second.log"};
  ASSERT_TRUE(second.await_output("spawned head", std::chrono::seconds(120))) << second.output();
  second.signal(SIGTERM);
  second.signal(SIGTERM);
  EXPECT_EQ(second.wait_for(std::chrono::seconds(60)), 130) << second.output();
}
