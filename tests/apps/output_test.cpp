// What `baton` prints and writes tells the truth about the run (issue 23
// item 5), checked on the real binary: every strategy's results table, log,
// metrics and --curves name the strategy and what each row is, number epochs
// from 1 and count the epoch's samples; --version, "did you mean" for a
// mistyped command, flag, key and choice, a port in use, and the units of
// `baton plan --bandwidth`.

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;

namespace {

/// A strategy's short run: its config, how the output names it and what its
/// results table's rows are.
struct strategy_case {
  std::string config;       ///< configs/NAME.yaml
  std::string strategy;     ///< the metrics' `mode`, the footer's first word
  std::string result_label; ///< the table's first column, the curves' `kind`
  std::vector<std::string> extra; ///< --set options of its own
};

std::vector<strategy_case> strategies() {
  return {{"transfer", "transfer", "head", {"--set", "backbone.checkpoint=none"}},
          {"pipeline", "pipeline", "stage", {"--set", "pipeline.schedule=gpipe"}},
          {"data-parallel", "data-parallel", "workers", {}},
          {"ist", "ist", "workers", {}},
          {"resist", "resist", "workers", {}}};
}

/// The cells of one CSV line (no quoting: baton's curves have none).
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in{line};
  std::string cell;
  while (std::getline(in, cell, ','))
    out.push_back(cell);
  if (!line.empty() && line.back() == ',')
    out.emplace_back();
  return out;
}

/// The lines of the file at `path`.
std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in{path};
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

class output : public ::testing::Test {
protected:
  static void SetUpTestSuite() { dir_ = std::make_unique<scratch_dir>("output"); }
  static void TearDownTestSuite() { dir_.reset(); }
  static std::string path_of(const std::string& name) { return dir_->path() + "/" + name; }
  static inline std::unique_ptr<scratch_dir> dir_;
};

} // namespace

// Every strategy, 2 epochs of 512 samples in this process: the table's first
// column says what a row is, the footer and the metrics' `mode` name the
// strategy (never "shared"), epochs are numbered 1 and 2 in the log, the
// metrics and the curves, every epoch counts the epoch's 512 samples, and
// every epoch row of the curves has its time, samples, loss, accuracy,
// samples/s and bytes sent.
TEST_F(output, every_strategy_names_itself_and_numbers_epochs_from_one) {
  for (const auto& s : strategies()) {
    SCOPED_TRACE(s.config);
    const auto metrics_path = path_of(s.config + ".json");
    const auto curves_path = path_of(s.config + ".csv");
    auto args = with({"run", source_path("configs/" + s.config + ".yaml")},
                     {"--set", "data.train_limit=512", "--set", "data.test_limit=128", "--set",
                      "data.epochs=2", "--metrics-out", metrics_path, "--curves", curves_path});
    auto out = run_baton(with(args, s.extra));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_TRUE(std::regex_search(out.text, std::regex{"\n" + s.result_label + " +task +test acc"}))
      << out.text;
    EXPECT_TRUE(contains(out.text, "\n" + s.strategy + " (actors): ")) << out.text;
    EXPECT_FALSE(contains(out.text, "shared")) << out.text;
    EXPECT_TRUE(contains(out.text, "info epoch 1 ")) << out.text;
    EXPECT_TRUE(contains(out.text, "info epoch 2 ")) << out.text;
    EXPECT_FALSE(contains(out.text, "info epoch 0 ")) << out.text;
    EXPECT_FALSE(contains(out.text, "info epoch 3 ")) << out.text;

    auto metrics = read_json(metrics_path);
    ASSERT_FALSE(metrics.is_discarded()) << out.text;
    EXPECT_EQ(metrics.at("mode"), s.strategy);
    EXPECT_EQ(metrics.at("result_label"), s.result_label);
    ASSERT_FALSE(metrics.at("heads").empty());
    for (const auto& head : metrics.at("heads")) {
      ASSERT_EQ(head.at("epochs").size(), 2u) << head.dump();
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(head.at("epochs")[e].at("epoch"), e + 1) << head.dump();
        EXPECT_EQ(head.at("epochs")[e].at("samples"), 512) << head.dump();
        EXPECT_TRUE(head.at("epochs")[e].contains("bytes_sent")) << head.dump();
      }
    }

    auto csv = lines_of(curves_path);
    ASSERT_FALSE(csv.empty());
    EXPECT_EQ(csv[0], "strategy,kind,actor,epoch,seconds,samples,train_loss,test_accuracy,"
                      "samples_per_second,bytes_sent,validation_accuracy");
    size_t epoch_rows = 0;
    std::map<std::string, int64_t> member_samples; // per epoch, of the workers' own rows
    for (size_t i = 1; i < csv.size(); ++i) {
      auto row = cells(csv[i]);
      ASSERT_EQ(row.size(), 11u) << csv[i];
      EXPECT_EQ(row[0], s.strategy) << csv[i];
      if (row[3].empty())
        continue; // an actor's totals
      if (row[1] != s.result_label) { // a worker's own share of the group's epoch
        EXPECT_EQ(s.result_label, "workers") << csv[i];
        member_samples[row[3]] += std::stoll(row[5]);
        continue;
      }
      ++epoch_rows;
      EXPECT_EQ(row[1], s.result_label) << csv[i];
      EXPECT_EQ(row[3], std::to_string(1 + (epoch_rows - 1) % 2)) << csv[i];
      EXPECT_EQ(row[5], "512") << csv[i];
      for (size_t c : {4, 6, 7, 8, 9})
        EXPECT_FALSE(row[c].empty()) << "column " << c << ": " << csv[i];
      EXPECT_GT(std::stod(row[8]), 0) << csv[i];
    }
    EXPECT_EQ(epoch_rows, 2 * metrics.at("heads").size());
    // Each worker has its own row per epoch; together they trained the epoch.
    if (s.result_label == "workers")
      EXPECT_EQ(member_samples, (std::map<std::string, int64_t>{{"1", 512}, {"2", 512}}));
    // The strategies that exchange weights or gradients say how much.
    if (s.result_label == "workers")
      EXPECT_GT(std::stoll(cells(csv[1])[9]), 0) << csv[1];
  }
}

TEST_F(output, version_names_the_project_version) {
  auto out = run_baton({"--version"});
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(std::regex_search(out.text, std::regex{"^baton [0-9]+\\.[0-9]+\\.[0-9]+"}))
    << out.text;
}

TEST_F(output, a_mistyped_command_flag_key_or_choice_gets_a_suggestion) {
  auto command = run_baton({"runn"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_TRUE(contains(command.text, "unknown command 'runn' (did you mean 'run'?)"))
    << command.text;

  auto flag = run_baton({"run", source_path("configs/pipeline.yaml"), "--metrics-outt", "x"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_TRUE(contains(flag.text, "'--metrics-outt' (did you mean '--metrics-out'?)"))
    << flag.text;

  // A key of a topology file: the file, the line and the closest key.
  const auto file = path_of("typo.yaml");
  std::ofstream{file} << "job: pipeline\ndata:\n  dataset: synthetic\n  bach_size: 32\n";
  auto key = run_baton({"run", file});
  EXPECT_EQ(key.exit_code, 2);
  EXPECT_TRUE(contains(key.text, file + ":4: unknown key 'bach_size'")) << key.text;
  EXPECT_TRUE(contains(key.text, "did you mean 'batch_size'?")) << key.text;

  auto set = run_baton({"run", source_path("configs/pipeline.yaml"), "--set", "data.epoch=2"});
  EXPECT_EQ(set.exit_code, 2);
  EXPECT_TRUE(contains(set.text, "did you mean 'epochs'?")) << set.text;

  auto choice = run_baton({"run", source_path("configs/pipeline.yaml"), "--set", "job=pipline"});
  EXPECT_EQ(choice.exit_code, 2);
  EXPECT_TRUE(contains(choice.text, "got 'pipline'; did you mean 'pipeline'?")) << choice.text;
}

// `baton node --port P` where another process listens on P says so, in the
// kernel's words, and exits 2.
TEST_F(output, a_port_in_use_says_address_in_use) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t size = sizeof at;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &size), 0);
  const auto port = std::to_string(ntohs(at.sin_port));
  auto out = run_baton_bounded({"node", "--port", port}, 30);
  ::close(fd);
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_TRUE(contains(out.text, "cannot listen on 127.0.0.1:" + port + ": address in use"))
    << out.text;
}

// `baton plan --bandwidth` takes the rates of --link: 1gbit is 125e6 bytes/s
// and plans exactly as that number does; 100mbit is slower to sync; a word
// that is no rate is refused with the forms it takes.
TEST_F(output, plan_bandwidth_takes_link_rates) {
  const auto profile = path_of("profile.json");
  auto made = run_baton({"profile", source_path("configs/pipeline.yaml"), "--out", profile,
                         "--microbatches", "2"});
  ASSERT_EQ(made.exit_code, 0) << made.text;
  auto plan = [&](const std::string& bandwidth) {
    return run_baton({"plan", "--profile", profile, "--machines", "3", "--bandwidth", bandwidth});
  };
  auto gbit = plan("1gbit");
  auto bytes = plan("125000000");
  auto mbit = plan("100mbit");
  ASSERT_EQ(gbit.exit_code, 0) << gbit.text;
  ASSERT_EQ(mbit.exit_code, 0) << mbit.text;
  EXPECT_EQ(gbit.text, bytes.text);
  EXPECT_NE(gbit.text, mbit.text);
  auto bad = plan("12furlongs");
  EXPECT_EQ(bad.exit_code, 2) << bad.text;
  EXPECT_TRUE(contains(bad.text, "--bandwidth expects a rate as --link takes it (1gbit, 100mbit"))
    << bad.text;
}

// --mode local (the one-process reference) names the strategy as the actors'
// run does, counts each epoch's samples (data-parallel's were 0) and writes
// curves without the bytes it cannot know (and without times where its loop
// does not time its epochs), and no actor rows.
TEST_F(output, the_local_reference_names_the_strategy_and_counts_samples) {
  for (const std::string config : {"resist", "data-parallel"}) {
    SCOPED_TRACE(config);
    const auto metrics_path = path_of(config + "-local.json");
    const auto curves_path = path_of(config + "-local.csv");
    auto out = run_baton({"run", source_path("configs/" + config + ".yaml"), "--mode", "local",
                          "--set", "data.train_limit=512", "--set", "data.test_limit=128",
                          "--set", "data.epochs=2", "--metrics-out", metrics_path, "--curves",
                          curves_path});
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_TRUE(contains(out.text, "\n" + config + " (local): ")) << out.text;
    auto metrics = read_json(metrics_path);
    ASSERT_FALSE(metrics.is_discarded()) << out.text;
    EXPECT_EQ(metrics.at("mode"), config);
    EXPECT_EQ(metrics.at("run"), "local");
    const auto csv = lines_of(curves_path);
    ASSERT_EQ(csv.size(), 3u) << read_text(curves_path); // the header and 2 epochs
    for (int e = 1; e <= 2; ++e) {
      auto row = cells(csv[e]);
      ASSERT_EQ(row.size(), 11u) << csv[e];
      EXPECT_EQ(row[0], config);
      EXPECT_EQ(row[1], "workers");
      EXPECT_EQ(row[3], std::to_string(e));
      EXPECT_EQ(row[5], "512") << csv[e];
      EXPECT_TRUE(row[9].empty()) << csv[e]; // no bytes: nothing crossed a wire
      // Data-parallel's loop times its epochs (compare measures its time to
      // target); ResIST's does not.
      const bool timed = config == "data-parallel";
      EXPECT_EQ(!row[4].empty() && !row[8].empty(), timed) << csv[e];
      EXPECT_EQ(row[4].empty() && row[8].empty(), !timed) << csv[e];
    }
  }
}
