// A bench stopped by a signal (issue 21, item 9): SIGTERM during `baton bench
// pipeline --quick --json F` used to go on to the next model, exit 5-10 s
// later with 1 and overwrite F with `"results": []`. Now every bench stops at
// the first SIGINT or SIGTERM, exits 130, and writes the rows it finished
// (marked "interrupted") or leaves F as it was.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;

namespace {

using clock_type = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A `baton` child process in its own process group (a signal to it reaches
/// no other process), output in a file; killed with its group if the test
/// ends while it still runs.
class bench_process {
public:
  bench_process(const std::vector<std::string>& args, const std::string& log) : log_(log) {
    pid_ = ::fork();
    if (pid_ != 0)
      return;
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::setpgid(0, 0);
    std::vector<std::string> all{BATON_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(BATON_BINARY, argv.data());
    ::_exit(127);
  }

  ~bench_process() {
    if (pid_ > 0 && code_ < 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  /// The exit code (128 + signal when killed), or -1 if it still runs
  /// after `limit`.
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

  /// `sig` to the bench process only (not to the runs it started).
  void signal(int sig) const { ::kill(pid_, sig); }

  std::string output() const { return read_file(log_); }

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

} // namespace

// The case of the issue: a signal before any row has finished. The bench
// exits 130 (not 1, not after the next model) and F keeps what it held.
TEST(bench_signal, sigterm_before_any_row_exits_130_and_leaves_the_json_file_as_it_was) {
  scratch_dir dir{"bench-signal"};
  auto json = dir.path() + "/figures.json";
  std::ofstream{json} << "figures of an earlier bench\n";
  bench_process bench{{"bench", "pipeline", "--quick", "--json", json},
                      dir.path() + "/pipeline.log"};
  // The first model's local run is done: its pipeline runs are under way, no
  // row has finished (a model's rows come after all of its runs).
  ASSERT_TRUE(bench.await_output("run 1/1 local", std::chrono::seconds(300))) << bench.output();
  bench.signal(SIGTERM);
  // A bound, not a timing: the stop watchdog ends baton 15 s after the signal.
  int code = bench.wait_for(std::chrono::seconds(120));
  auto text = bench.output();
  ASSERT_NE(code, -1) << "still running 120 s after SIGTERM:\n" << text;
  EXPECT_EQ(code, 130) << text;
  EXPECT_EQ(read_file(json), "figures of an earlier bench\n") << text;
  EXPECT_NE(text.find("left as it was"), std::string::npos) << text;
  EXPECT_EQ(text.find("resnet18:"), std::string::npos) << "went on to the next model:\n" << text;
}

// A signal after the first row: the bench stops there and writes that row,
// marked as interrupted, as valid JSON.
TEST(bench_signal, sigterm_after_a_row_writes_the_finished_rows_and_exits_130) {
  scratch_dir dir{"bench-signal"};
  auto json = dir.path() + "/figures.json";
  bench_process bench{{"bench", "data-parallel", "--quick", "--side", "ring", "--batch", "32",
                       "--set", "data.train_limit=1024", "--set", "data.test_limit=200",
                       "--json", json},
                      dir.path() + "/data-parallel.log"};
  // The local side's row (a line of its own; the header's "(a) local:" is
  // indented).
  ASSERT_TRUE(bench.await_output("\n(a) local ", std::chrono::seconds(300))) << bench.output();
  bench.signal(SIGTERM);
  int code = bench.wait_for(std::chrono::seconds(120));
  auto text = bench.output();
  ASSERT_NE(code, -1) << "still running 120 s after SIGTERM:\n" << text;
  EXPECT_EQ(code, 130) << text;
  auto figures = read_json(json);
  ASSERT_FALSE(figures.is_discarded()) << read_file(json) << "\n" << text;
  EXPECT_EQ(figures.value("interrupted", false), true) << figures.dump(2);
  ASSERT_EQ(figures.at("results").size(), 1u) << figures.dump(2);
  EXPECT_EQ(figures.at("results").at(0).at("side"), "local");
  EXPECT_GT(figures.at("results").at(0).at("samples_per_second").get<double>(), 0);
  EXPECT_EQ(text.find("(b) ring   "), std::string::npos) << "the ring side finished:\n" << text;
}
