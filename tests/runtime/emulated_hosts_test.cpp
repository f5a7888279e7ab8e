// `baton run --local-nodes N --link RATE[,DELAY]`: the link spec (no root),
// and, as root, runs whose nodes sit on emulated hosts (own network
// namespace, veth link to a bridge, shaped with tc): the same weights as on
// loopback, bytes/s under the link rate, and nothing left behind after a
// run, a failed run, a SIGKILLed node, Ctrl-C, or a crashed earlier run.

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include <gtest/gtest.h>

#include "actors/runtime/emulated_hosts.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
using baton::actors::parse_link_spec;

namespace {

#define REQUIRE_ROOT()                                                                           \
  if (::geteuid() != 0)                                                                          \
  GTEST_SKIP() << "--link needs root (network namespaces, veth pairs, tc): run the tests as "    \
                  "root to run this one"

/// Namespaces and interfaces named as emulated_hosts names them (baton-PID-nI,
/// btnbrPID, btnvPID...), one per line; empty when nothing is left.
std::string leftovers() {
  std::regex mine{R"((^|\s)(baton-[0-9]+-n[0-9]+|btnbr[0-9]+|btnv[0-9]+[hn][0-9]+)\b)"};
  std::string found;
  for (auto command : {"/usr/sbin/ip netns list", "/usr/sbin/ip -o link show"}) {
    std::istringstream lines(run_shell(command).text);
    for (std::string line; std::getline(lines, line);)
      if (std::regex_search(line, mine))
        found += line + "\n";
  }
  return found;
}

/// A short gpipe pipeline (3 stages) on Fashion-MNIST: 16 steps.
std::vector<std::string> shaped_pipeline_job() {
  return {"run",   source_path("configs/pipeline.yaml"),
          "--set", "data.train_limit=1024",
          "--set", "data.test_limit=256",
          "--set", "data.microbatches=2",
          "--set", "pipeline.schedule=gpipe",
          "--local-nodes", "2"};
}

/// The actor an edge goes to: a pipeline stage's gradients go "upstream",
/// from stageK to stageK-1.
std::string receiver(const nlohmann::json& edge) {
  auto from = edge.at("from").get<std::string>();
  auto to = edge.at("to").get<std::string>();
  std::smatch stage;
  if (to == "upstream" && std::regex_match(from, stage, std::regex{R"(stage([0-9]+))"}))
    return "stage" + std::to_string(std::stoi(stage[1]) - 1);
  return to;
}

/// Bytes sent from node to node (the nodes of the edges' actors).
std::map<std::pair<std::string, std::string>, int64_t> bytes_between_nodes(
  const nlohmann::json& metrics) {
  std::map<std::string, std::string> node_of;
  for (const auto& a : metrics.at("actors"))
    node_of[a.at("name").get<std::string>()] = a.at("node").get<std::string>();
  std::map<std::pair<std::string, std::string>, int64_t> bytes;
  for (const auto& e : metrics.at("edges")) {
    auto from = node_of.find(e.at("from").get<std::string>());
    auto to = node_of.find(receiver(e));
    if (from != node_of.end() && to != node_of.end() && from->second != to->second)
      bytes[{from->second, to->second}] += e.at("bytes").get<int64_t>();
  }
  return bytes;
}

} // namespace

TEST(emulated_hosts, link_specs_parse_with_units) {
  std::string error;
  auto a = parse_link_spec("1gbit,1ms", error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->rate_bits, 1000000000u);
  EXPECT_EQ(a->delay.count(), 1000);
  auto b = parse_link_spec("100mbit", error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(b->rate_bits, 100000000u);
  EXPECT_EQ(b->delay.count(), 0);
  auto c = parse_link_spec("2.5MBit,500us", error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->rate_bits, 2500000u);
  EXPECT_EQ(c->delay.count(), 500);
  auto d = parse_link_spec("64kbit,2s", error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(d->rate_bits, 64000u);
  EXPECT_EQ(d->delay.count(), 2000000);
}

TEST(emulated_hosts, bad_link_specs_say_what_is_expected) {
  for (const std::string text : {"", "fast", "100", "100mbps", "-1mbit", "0mbit", "1gbit,",
                                 "1gbit,1", "1gbit,1ms,2", ",1ms", "1gbit,fast", "1gbit,20s"}) {
    std::string error;
    EXPECT_FALSE(parse_link_spec(text, error)) << text;
    EXPECT_NE(error.find("expected RATE[,DELAY]"), std::string::npos) << text << ": " << error;
  }
}

TEST(emulated_hosts, a_bad_link_flag_exits_2_naming_the_flag) {
  auto bad = run_baton(with(shaped_pipeline_job(), {"--link", "fast"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.text;
  EXPECT_NE(bad.text.find("--link 'fast'"), std::string::npos) << bad.text;
  EXPECT_NE(bad.text.find("RATE[,DELAY]"), std::string::npos) << bad.text;
  auto alone = run_baton({"run", source_path("configs/pipeline.yaml"), "--link", "1gbit"});
  EXPECT_EQ(alone.exit_code, 2) << alone.text;
  EXPECT_NE(alone.text.find("--link needs --local-nodes"), std::string::npos) << alone.text;
  for (const std::string bench : {"transfer", "pipeline", "faults"}) {
    auto b = run_baton({"bench", bench, "--link", "1gbit,1"});
    EXPECT_EQ(b.exit_code, 2) << bench << ": " << b.text;
    EXPECT_NE(b.text.find("--link '1gbit,1'"), std::string::npos) << bench << ": " << b.text;
  }
}

TEST(emulated_hosts, without_root_the_error_says_so) {
  REQUIRE_ROOT();
  if (::access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "needs setpriv to run baton as another user";
  scratch_dir dir{"link-noroot"};
  std::string command = "TMPDIR=/tmp /usr/bin/setpriv --reuid=65534 --regid=65534 "
                        "--clear-groups " + quote(BATON_BINARY);
  for (const auto& a : with(shaped_pipeline_job(), {"--link", "1gbit"}))
    command += " " + quote(a);
  auto out = run_shell(command + " 2>&1");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--link 1gbit needs root"), std::string::npos) << out.text;
  EXPECT_EQ(leftovers(), "");
}

// Every emulated host runs TCP cubic, whatever this machine's default
// (emulated_hosts.cpp: BBR on a link without delay halves a busy direction's
// rate), and the log line says so.
TEST(emulated_hosts, every_host_runs_tcp_cubic) {
  REQUIRE_ROOT();
  std::string error;
  auto spec = parse_link_spec("100mbit", error);
  ASSERT_TRUE(spec) << error;
  auto hosts = baton::actors::emulated_hosts::create(2, *spec, error);
  ASSERT_TRUE(hosts) << error;
  EXPECT_NE(hosts->shaping().find("TCP cubic"), std::string::npos) << hosts->shaping();
  for (size_t i = 0; i < hosts->size(); ++i) {
    auto cc = run_shell("/usr/sbin/ip netns exec " + hosts->namespace_of(i) +
                        " cat /proc/sys/net/ipv4/tcp_congestion_control");
    EXPECT_EQ(cc.text, "cubic\n") << hosts->namespace_of(i);
  }
  hosts.reset();
  EXPECT_EQ(leftovers(), "");
}

// The same pipeline over loopback and over 50 Mbit/s links (1 ms where the
// kernel has netem): the same weights; every node-to-node direction carried
// less than the link rate over the run. A crashed earlier run's namespace
// and interfaces (pid 4999999: above any pid_max) are removed at start.
TEST(emulated_hosts, a_shaped_run_equals_the_loopback_run_under_the_rate) {
  REQUIRE_ROOT();
  scratch_dir dir{"link"};
  auto stale = run_shell("/usr/sbin/ip netns add baton-4999999-n1 && /usr/sbin/ip link add "
                         "btnv4999999h1 type veth peer name btnv4999999n1 && /usr/sbin/ip link "
                         "add btnbr4999999 type bridge");
  ASSERT_EQ(stale.exit_code, 0) << stale.text;
  auto loopback = run_job(dir, shaped_pipeline_job(), "loopback");
  auto shaped = run_job(dir, with(shaped_pipeline_job(), {"--link", "50mbit,1ms"}), "shaped");
  EXPECT_EQ(digests_by_actor(shaped), digests_by_actor(loopback));
  EXPECT_FALSE(digests_by_actor(shaped).empty());
  auto wall = shaped.at("wall_seconds").get<double>();
  auto between = bytes_between_nodes(shaped);
  EXPECT_FALSE(between.empty()) << "no bytes crossed a link";
  for (const auto& [nodes, bytes] : between) {
    double rate = static_cast<double>(bytes) / wall;
    std::printf("%s -> %s: %lld bytes in %.1f s over the link: %.2f MB/s (loopback run: %.1f s)\n",
                nodes.first.c_str(), nodes.second.c_str(), static_cast<long long>(bytes), wall,
                rate / 1e6, loopback.at("wall_seconds").get<double>());
    EXPECT_LT(rate, 50e6 / 8) << nodes.first << " -> " << nodes.second;
  }
  EXPECT_EQ(leftovers(), "");
}

// Data parallelism over two emulated hosts: the ring's chunks cross the
// links, the weights are the loopback run's, and each worker's bytes went
// at most at the link's rate.
TEST(emulated_hosts, a_data_parallel_ring_over_shaped_links_equals_loopback) {
  REQUIRE_ROOT();
  scratch_dir dir{"link-dp"};
  const std::vector<std::string> job{"run",   source_path("configs/data-parallel.yaml"),
                                     "--set", "data.train_limit=512",
                                     "--set", "data.test_limit=128",
                                     "--set", "data.epochs=1",
                                     "--local-nodes", "2"};
  auto loopback = run_job(dir, job, "loopback");
  auto shaped = run_job(dir, with(job, {"--link", "50mbit,1ms"}), "shaped");
  EXPECT_EQ(digests_by_actor(shaped), digests_by_actor(loopback));
  EXPECT_EQ(digests_by_actor(shaped).size(), 2u) << "two workers";
  auto wall = shaped.at("wall_seconds").get<double>();
  auto between = bytes_between_nodes(shaped);
  ASSERT_EQ(between.size(), 2u) << "each worker sends to the other's node";
  for (const auto& [nodes, bytes] : between) {
    double rate = static_cast<double>(bytes) / wall;
    std::printf("%s -> %s: %lld bytes in %.1f s: %.2f MB/s (loopback run: %.1f s)\n",
                nodes.first.c_str(), nodes.second.c_str(), static_cast<long long>(bytes), wall,
                rate / 1e6, loopback.at("wall_seconds").get<double>());
    EXPECT_LT(rate, 50e6 / 8) << nodes.first << " -> " << nodes.second;
  }
  EXPECT_EQ(leftovers(), "");
}

// A run that fails (an actor throws and restarts are off) and a run whose
// node n2 is SIGKILLed mid-run leave nothing behind.
TEST(emulated_hosts, nothing_is_left_after_a_failure_or_a_killed_node) {
  REQUIRE_ROOT();
  auto failed = run_baton(with(shaped_pipeline_job(), {"--link", "1gbit", "--set",
                                                "runtime.max_restarts=0", "--fault",
                                                "kind=throw,actor=stage1,at_step=2"}));
  EXPECT_NE(failed.exit_code, 0) << failed.text;
  EXPECT_EQ(leftovers(), "") << failed.text;
  auto killed = run_baton(with(shaped_pipeline_job(), {"--link", "1gbit", "--fault",
                                                "kind=kill_node,node=n2,at_step=3"}));
  EXPECT_NE(killed.text.find("emulated hosts"), std::string::npos) << killed.text;
  EXPECT_EQ(leftovers(), "") << killed.text;
}

// Ctrl-C (SIGINT to baton) once the emulated hosts exist: baton stops (130)
// and removes them.
TEST(emulated_hosts, nothing_is_left_after_ctrl_c) {
  REQUIRE_ROOT();
  std::string command = quote(BATON_BINARY);
  for (const auto& a : with(shaped_pipeline_job(), {"--link", "1gbit", "--set", "data.epochs=20"}))
    command += " " + quote(a);
  // Wait for baton's own namespace (named with its pid), then SIGINT it.
  auto out = run_shell(command + " 2>&1 & pid=$!; for i in $(seq 300); do "
                       "/usr/sbin/ip netns list | grep -q \"^baton-$pid-n2\" && break; "
                       "sleep 0.1; done; sleep 2; kill -INT $pid; wait $pid; echo \"exit=$?\"");
  EXPECT_NE(out.text.find("exit=130"), std::string::npos) << out.text;
  EXPECT_EQ(leftovers(), "") << out.text;
}
