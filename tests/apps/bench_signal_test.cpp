// A bench stopped by a signal (issue 21, item 9): SIGTERM during `baton bench
// pipeline --quick --json F` used to go on to the next model, exit 5-10 s
// later with 1 and overwrite F with `"results": []`. Now every bench stops at
// the first SIGINT or SIGTERM, exits 130, and writes the rows it finished
// (marked "interrupted") or leaves F as it was. A reader of its output that
// goes away (`| head`) stops it the same way.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/baton_process.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

// The case of the issue: a signal before any row has finished. The bench
// exits 130 (not 1, not after the next model) and F keeps what it held.
TEST(bench_signal, sigterm_before_any_row_exits_130_and_leaves_the_json_file_as_it_was) {
  scratch_dir dir{"bench-signal"};
  auto json = dir.path() + "/figures.json";
  std::ofstream{json} << "figures of an earlier bench\n";
  baton_process bench{{"bench", "pipeline", "--quick", "--json", json},
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
  EXPECT_EQ(read_text(json), "figures of an earlier bench\n") << text;
  EXPECT_NE(text.find("left as it was"), std::string::npos) << text;
  EXPECT_EQ(text.find("resnet18:"), std::string::npos) << "went on to the next model:\n" << text;
}

// A signal after the first row: the bench stops there and writes that row,
// marked as interrupted, as valid JSON.
TEST(bench_signal, sigterm_after_a_row_writes_the_finished_rows_and_exits_130) {
  scratch_dir dir{"bench-signal"};
  auto json = dir.path() + "/figures.json";
  // The convnet, not the default 20 M-parameter mlp: the PyTorch peers' rows
  // before (a) take 16 s instead of 25.
  baton_process bench{{"bench", "data-parallel", "--quick", "--model", "convnet", "--side",
                       "ring", "--batch", "32", "--set", "data.train_limit=1024", "--set",
                       "data.test_limit=200", "--json", json},
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
  ASSERT_FALSE(figures.is_discarded()) << read_text(json) << "\n" << text;
  EXPECT_EQ(figures.value("interrupted", false), true) << figures.dump(2);
  ASSERT_EQ(figures.at("results").size(), 1u) << figures.dump(2);
  EXPECT_EQ(figures.at("results").at(0).at("side"), "local");
  EXPECT_GT(figures.at("results").at(0).at("samples_per_second").get<double>(), 0);
  EXPECT_EQ(text.find("(b) ring   "), std::string::npos) << "the ring side finished:\n" << text;
}

// `baton bench ... | head -1`: the SIGPIPE of the bench's next line used to end
// baton where it stood and leave its $TMPDIR/baton-bench-* directory. Now it
// stops the bench as SIGINT does: exit 130, the directory removed.
TEST(bench_signal, a_reader_of_its_output_that_goes_away_stops_it_cleanly) {
  scratch_dir dir{"bench-pipe"};
  scoped_tmpdir tmp{dir.path()};
  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  process_limits setup;
  setup.stdout_fd = ends[1];
  baton_process bench{{"bench", "data-parallel", "--quick", "--model", "convnet", "--side",
                       "ring", "--batch", "32", "--set", "data.train_limit=1024", "--set",
                       "data.test_limit=200"},
                      dir.path() + "/stderr.log", setup};
  ::close(ends[1]);
  // `head -1`: the first line, then the reader is gone.
  std::string line;
  char c = 0;
  while (::read(ends[0], &c, 1) == 1 && c != '\n')
    line += c;
  ::close(ends[0]);
  ASSERT_FALSE(line.empty()) << bench.output();
  int code = bench.wait_for(std::chrono::seconds(120));
  auto text = bench.output();
  ASSERT_NE(code, -1) << "still running 120 s after its reader went:\n" << text;
  EXPECT_EQ(code, 130) << "ended by the SIGPIPE (141) or otherwise:\n" << text;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().rfind("baton-bench", 0), std::string::npos)
        << entry.path() << " was left behind:\n" << text;
}
