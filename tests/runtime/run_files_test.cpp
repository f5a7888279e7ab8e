// The files a run writes and leaves (issue 9, items 13-18 and 20): outputs
// checked before anything trains, never an input of the run, the results
// table printed even when an output fails at the end, node flags refused
// with a message, and no directory left behind in $TMPDIR.

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

/// A short transfer job (3 heads), 512 samples.
std::vector<std::string> short_job(const std::vector<std::string>& more = {}) {
  return with(short_transfer_job(), more);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

class run_files : public ::testing::Test {
protected:
  scratch_dir scratch_{"run-files"};
  const std::string dir_ = scratch_.path();
};

} // namespace

// Item 13: an unwritable --metrics-out was found after training, without a
// reason. Now before anything starts, exit code 2, with the reason.
TEST_F(run_files, unwritable_outputs_are_refused_before_training) {
  auto missing = run_baton(short_job({"--metrics-out", dir_ + "/no/such/dir/m.json"}));
  EXPECT_EQ(missing.exit_code, 2) << missing.text;
  EXPECT_NE(missing.text.find("does not exist"), std::string::npos) << missing.text;
  EXPECT_EQ(missing.text.find("spawned"), std::string::npos) << missing.text;

  auto trace = run_baton(short_job({"--trace", dir_ + "/no/t.json"}));
  EXPECT_EQ(trace.exit_code, 2) << trace.text;
  EXPECT_NE(trace.text.find("--trace"), std::string::npos) << trace.text;

  // A device would be replaced by the rename that writes the file.
  auto device = run_baton(short_job({"--metrics-out", "/dev/null"}));
  EXPECT_EQ(device.exit_code, 2) << device.text;
  EXPECT_NE(device.text.find("not a regular file"), std::string::npos) << device.text;
  struct stat st{};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// Item 14: a directory failed at the end and left a stray DIR.tmp.
TEST_F(run_files, a_directory_as_output_is_refused_and_nothing_is_left) {
  auto out = dir_ + "/metrics";
  fs::create_directory(out);
  auto r = run_baton(short_job({"--metrics-out", out}));
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_NE(r.text.find("is a directory"), std::string::npos) << r.text;
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_TRUE(fs::is_directory(out));
}

// Item 15: an output equal to an input silently overwrote it.
TEST_F(run_files, outputs_that_are_inputs_of_the_run_are_refused) {
  auto topology = dir_ + "/transfer.yaml";
  fs::copy_file(source_path("configs/transfer.yaml"), topology);
  auto before = read_text(topology);
  // The copy's relative backbone.checkpoint would point elsewhere: name it.
  auto checkpoint = source_path("build/checkpoints/convnet-pretrained.pt");
  auto same_topology = run_baton({"run", topology, "--set", "backbone.checkpoint=" + checkpoint,
                                  "--metrics-out", topology});
  EXPECT_EQ(same_topology.exit_code, 2) << same_topology.text;
  EXPECT_NE(same_topology.text.find("is an input of this run"), std::string::npos)
    << same_topology.text;
  EXPECT_EQ(read_text(topology), before);

  // Through another spelling of the path.
  auto spelled = run_baton({"run", topology, "--set", "backbone.checkpoint=" + checkpoint,
                            "--metrics-out", dir_ + "/./../" + fs::path(dir_).filename().string() +
                                               "/transfer.yaml"});
  EXPECT_EQ(spelled.exit_code, 2) << spelled.text;

  auto backbone = run_baton(short_job({"--set", "backbone.checkpoint=" + checkpoint,
                                       "--metrics-out", checkpoint}));
  EXPECT_EQ(backbone.exit_code, 2) << backbone.text;
  EXPECT_NE(backbone.text.find("is an input of this run"), std::string::npos) << backbone.text;

  auto twice = run_baton(short_job({"--metrics-out", dir_ + "/x.json", "--trace",
                                    dir_ + "/x.json"}));
  EXPECT_EQ(twice.exit_code, 2) << twice.text;
}

// Issue 32 item 2: baton never writes through a symbolic link that someone
// who may write in an output's directory put there. A link as the output
// is refused before training, naming it (it was replaced silently); a
// dangling link at OUT.tmp, where the check of the output used to create a
// file, is left alone, so the file it points to is never made; a link as
// `baton node --port-file` is refused before the node listens.
TEST_F(run_files, outputs_are_never_written_through_a_symbolic_link) {
  auto victim = dir_ + "/victim.json";
  std::ofstream{victim} << "precious\n";
  auto link = dir_ + "/metrics.json";
  fs::create_symlink(victim, link);
  auto linked = run_baton(short_job({"--metrics-out", link}));
  EXPECT_EQ(linked.exit_code, 2) << linked.text;
  EXPECT_TRUE(contains(linked.text, "--metrics-out " + link + ": it is a symbolic link (to '" +
                                      victim + "')"))
    << linked.text;
  EXPECT_FALSE(contains(linked.text, "weights (sha256)")) << linked.text;
  EXPECT_EQ(read_text(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(link));

  auto out = dir_ + "/m.json";
  auto elsewhere = dir_ + "/made-through-the-link";
  fs::create_symlink(elsewhere, out + ".tmp");
  auto ok = run_baton(short_job({"--metrics-out", out}));
  EXPECT_EQ(ok.exit_code, 0) << ok.text;
  EXPECT_TRUE(fs::exists(out)) << ok.text;
  EXPECT_FALSE(fs::exists(elsewhere)) << "the output check created the link's target";

  auto port_link = dir_ + "/port";
  fs::create_symlink(victim, port_link);
  auto node = run_baton_bounded({"node", "--port", "0", "--port-file", port_link}, 30, 0);
  EXPECT_EQ(node.exit_code, 2) << node.text;
  EXPECT_TRUE(contains(node.text, "--port-file " + port_link + ": cannot write '" + port_link +
                                    "': it is a symbolic link"))
    << node.text;
  EXPECT_EQ(read_text(victim), "precious\n");
}

// Issue 32 item 2, `baton report`: report.json went through
// OUT/report.json.tmp opened with std::ofstream, so a link there had the
// report overwrite the file it points to. A link at the report's own name
// is refused, naming it.
TEST_F(run_files, a_report_is_never_written_through_a_symbolic_link) {
  auto metrics = dir_ + "/m.json";
  auto run = run_baton({"run", source_path("configs/data-parallel.yaml"), "--mode", "local",
                        "--set", "data.train_limit=256", "--set", "data.test_limit=200",
                        "--metrics-out", metrics});
  ASSERT_EQ(run.exit_code, 0) << run.text;
  auto victim = dir_ + "/victim";
  std::ofstream{victim} << "precious\n";
  auto out = dir_ + "/report";
  fs::create_directory(out);
  fs::create_symlink(victim, out + "/report.json.tmp");
  auto report = run_baton({"report", metrics, "--out", out});
  EXPECT_EQ(report.exit_code, 0) << report.text;
  EXPECT_EQ(read_text(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(out + "/report.json"));

  fs::remove(out + "/report.html");
  fs::create_symlink(victim, out + "/report.html");
  auto linked = run_baton({"report", metrics, "--out", out});
  EXPECT_EQ(linked.exit_code, 2) << linked.text;
  EXPECT_TRUE(contains(linked.text, "cannot write '" + out + "/report.html': it is a symbolic "
                                    "link"))
    << linked.text;
  EXPECT_EQ(read_text(victim), "precious\n");
}

// Item 13, second half: an output that fails at the end (here its
// name is taken by a directory made during the run, so the rename fails) still
// leaves the results table on the screen, and the reason.
TEST_F(run_files, the_results_table_is_printed_when_writing_fails_at_the_end) {
  auto out = dir_ + "/m.json";
  std::string cmd = quote(BATON_BINARY);
  // 6,000 samples: still training long after the heads are spawned, however
  // late this process reads that line.
  for (const auto& a : short_job({"--set", "data.train_limit=6000", "--metrics-out", out}))
    cmd += " " + quote(a);
  cmd += " 2>&1 </dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char line[4096];
  bool blocked = false;
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    text += line;
    if (!blocked && text.find("spawned head") != std::string::npos)
      blocked = fs::create_directory(out); // the rename over it fails
  }
  int status = ::pclose(pipe);
  ASSERT_TRUE(blocked) << text;
  EXPECT_EQ(WEXITSTATUS(status), 2) << text;
  EXPECT_NE(text.find("weights (sha256)"), std::string::npos) << text;
  EXPECT_NE(text.find("--metrics-out: cannot write '" + out + "'"), std::string::npos) << text;
}

// Items 16-18: node flags out of range were refused silently or accepted.
TEST_F(run_files, bad_node_flags_are_refused_with_a_message) {
  for (const auto* port : {"70000", "65536"}) {
    auto r = run_baton({"node", "--port", port});
    EXPECT_EQ(r.exit_code, 2) << r.text;
    EXPECT_NE(r.text.find("0 (any) to 65535"), std::string::npos) << r.text;
  }
  auto threads = run_baton({"run", "--mode", "local", "--threads", "100000"});
  EXPECT_EQ(threads.exit_code, 2) << threads.text;
  EXPECT_NE(threads.text.find("from 0 to 256"), std::string::npos) << threads.text;
  auto empty_name = run_baton({"node", "--name", ""});
  EXPECT_EQ(empty_name.exit_code, 2) << empty_name.text;
  EXPECT_NE(empty_name.text.find("--name needs a value, got an empty one"), std::string::npos)
    << empty_name.text;
  auto odd_name = run_baton({"node", "--name", "a/b"});
  EXPECT_EQ(odd_name.exit_code, 2) << odd_name.text;

  // A launcher waiting for the port file would wait forever: the node says
  // it cannot write it and exits before listening.
  auto port_file = run_baton({"node", "--port-file", dir_ + "/no/such/dir/port"});
  EXPECT_EQ(port_file.exit_code, 2) << port_file.text;
  EXPECT_NE(port_file.text.find("--port-file"), std::string::npos) << port_file.text;
  EXPECT_EQ(port_file.text.find("listening"), std::string::npos) << port_file.text;
  auto directory = run_baton({"node", "--port-file", dir_});
  EXPECT_EQ(directory.exit_code, 2) << directory.text;
}

// Issue 10 item 7: node.yaml's own reader said "unknown key 'name'" of a
// `name` of the wrong type, and took a key given twice.
TEST_F(run_files, node_file_errors_name_the_key_the_line_and_what_was_expected) {
  auto config = dir_ + "/node.yaml";
  std::ofstream{config} << "port: 7001\nname: [a]\n";
  auto name = run_baton({"node", "--config", config});
  EXPECT_EQ(name.exit_code, 2) << name.text;
  EXPECT_NE(name.text.find(config + ":2: 'name' must be a non-empty name"), std::string::npos)
    << name.text;
  EXPECT_NE(name.text.find("got a list"), std::string::npos) << name.text;
  EXPECT_EQ(name.text.find("unknown key"), std::string::npos) << name.text;
  std::ofstream{config} << "name: n1\ntls:\n  ca: ca.pem\n  ca: other.pem\n";
  auto twice = run_baton({"node", "--config", config});
  EXPECT_EQ(twice.exit_code, 2) << twice.text;
  EXPECT_NE(twice.text.find(config + ":4: key 'ca' appears twice in 'tls'"), std::string::npos)
    << twice.text;
}

// Item 20: every --local-nodes run left a baton-nodes-* directory and failed
// runs left baton-checkpoints-*. A successful run leaves nothing; a failed
// one keeps the nodes' logs, and its checkpoints only when it has one to
// resume from (issue 21 item 5), saying where.
TEST_F(run_files, runs_leave_nothing_in_the_temporary_directory) {
  auto tmp = dir_ + "/tmp";
  fs::create_directory(tmp);
  scoped_tmpdir scoped{tmp};
  auto ok = run_baton(short_job({"--local-nodes", "2", "--set", "runtime.checkpoint_every=2"}));
  EXPECT_EQ(ok.exit_code, 0) << ok.text;
  EXPECT_TRUE(entries(tmp).empty()) << ok.text;

  // At step 6 every head has its checkpoint of step 2 (a credit window of 4
  // microbatches, 2 per step, is as far as one head runs ahead of another).
  auto failed = run_baton(short_job({"--local-nodes", "2", "--set", "runtime.checkpoint_every=2",
                                     "--set", "runtime.max_restarts=0", "--fault",
                                     "kind=throw,actor=all10,at_step=6"}));
  EXPECT_EQ(failed.exit_code, 1) << failed.text;
  auto left = entries(tmp);
  std::sort(left.begin(), left.end());
  ASSERT_EQ(left.size(), 2u) << failed.text;
  EXPECT_EQ(left[0].rfind("baton-checkpoints-", 0), 0u) << left[0];
  EXPECT_NE(failed.text.find("baton run --resume " + tmp + "/" + left[0]), std::string::npos)
    << failed.text;
  EXPECT_EQ(left[1].rfind("baton-nodes-", 0), 0u) << left[1];
  EXPECT_NE(failed.text.find("logs are kept in " + tmp + "/" + left[1]), std::string::npos)
    << failed.text;
  fs::remove_all(tmp + "/" + left[0]);

  // Failed before its first checkpoint: nothing to resume, nothing kept.
  auto embedded = run_baton(short_job({"--set", "runtime.checkpoint_every=2", "--set",
                                       "runtime.max_restarts=0", "--fault",
                                       "kind=throw,actor=all10,at_step=1"}));
  EXPECT_EQ(embedded.exit_code, 1) << embedded.text;
  EXPECT_EQ(entries(tmp).size(), 1u) << embedded.text;
}
