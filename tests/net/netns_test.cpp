// Nodes on two "hosts": one node in this network namespace, one in its own
// (`ip netns`), joined by a veth pair shaped with `tc` (netem delay, or a
// tbf bandwidth limit where the kernel has no netem), so that the
// traffic between them crosses a real network stack. Taking the link down
// mid-run shows detection (heartbeats) and recovery across hosts. Needs
// root (CAP_NET_ADMIN); skipped with a clear message elsewhere.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/commands.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/node_process.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

/// Runs a shell command; true when it exited 0.
bool sh(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

class netns : public ::testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "needs root for ip netns and veth pairs (run the tests as root)";
    auto id = std::to_string(::getpid() % 200 + 20);
    ns_ = "baton-h2-" + id;
    host_if_ = "bvh" + id;
    ns_if_ = "bvn" + id;
    host_ip_ = "10.213." + id + ".1";
    ns_ip_ = "10.213." + id + ".2";
    bool ok = sh("ip netns add " + ns_) &&
              sh("ip link add " + host_if_ + " type veth peer name " + ns_if_) &&
              sh("ip link set " + ns_if_ + " netns " + ns_) &&
              sh("ip addr add " + host_ip_ + "/24 dev " + host_if_) &&
              sh("ip link set " + host_if_ + " up") &&
              sh("ip netns exec " + ns_ + " ip addr add " + ns_ip_ + "/24 dev " + ns_if_) &&
              sh("ip netns exec " + ns_ + " ip link set " + ns_if_ + " up") &&
              sh("ip netns exec " + ns_ + " ip link set lo up");
    if (!ok)
      GTEST_SKIP() << "cannot make a network namespace with a veth pair here (ip netns / ip "
                      "link failed: no CAP_NET_ADMIN, or no netns support)";
    created_ = true;
    // 5 ms each way on the link: a real, slower network between the hosts.
    // Kernels without sch_netem (this project's CI VMs) get a bandwidth
    // limit instead (tbf, 200 Mbit/s): still a shaped link, without delay.
    shaping_ = "netem delay 5ms";
    auto shape = [&](const std::string& qdisc) {
      return sh("tc qdisc add dev " + host_if_ + " root " + qdisc) &&
             sh("ip netns exec " + ns_ + " tc qdisc add dev " + ns_if_ + " root " + qdisc);
    };
    if (!shape(shaping_)) {
      shaping_ = "tbf rate 200mbit burst 64kb latency 50ms";
      if (!shape(shaping_))
        shaping_ = "none";
    }
    std::printf("link between the hosts shaped with: %s\n", shaping_.c_str());
    dir_ = std::make_unique<scratch_dir>("netns");
  }

  void TearDown() override {
    if (!created_)
      return;
    sh("ip link del " + host_if_);
    sh("ip netns del " + ns_);
  }

  /// A node on `host` with the heartbeats that detect a lost link within
  /// the test; `launcher` runs it in another namespace.
  node_process start_node(const std::string& name, const std::string& host,
                          const std::vector<std::string>& launcher = {}) const {
    return node_process{dir_->path(), name,
                        {"--host", host, "--insecure", "--heartbeat-ms", "200",
                         "--connection-timeout-ms", "2000"},
                        launcher};
  }

  std::string ns_, host_if_, ns_if_, host_ip_, ns_ip_;
  std::unique_ptr<scratch_dir> dir_;
  bool created_ = false;
  std::string shaping_; ///< the tc qdisc on the link
};

} // namespace

// The pipeline over both hosts equals the embedded run; then, with the link
// to host 2 taken down mid-run, the coordinator detects the lost node by its
// missing heartbeats, moves its stages to host 1 and ends with the same
// weights.
TEST_F(netns, a_link_taken_down_between_hosts_is_detected_and_recovered) {
  auto h1 = start_node("h1", host_ip_);
  // `ip netns exec NS` runs (execs) the node inside the namespace.
  auto h2 = start_node("h2", ns_ip_, {"/bin/sh", "-c", "exec ip netns exec " + ns_ + " \"$@\"",
                                      "sh"});
  int p1 = h1.port(), p2 = h2.port();
  ASSERT_GT(p1, 0) << "node h1 did not start (see " << h1.log_path() << ")";
  ASSERT_GT(p2, 0) << "node h2 did not start in " << ns_ << " (see " << h2.log_path() << ")";

  std::vector<std::string> job{"run",   source_path("configs/pipeline.yaml"),
                               "--set", "data.train_limit=2048",
                               "--set", "data.test_limit=256",
                               "--set", "data.microbatches=2",
                               "--set", "pipeline.schedule=gpipe",
                               "--set", "runtime.checkpoint_every=4"};
  auto embedded_metrics = dir_->path() + "/embedded.json";
  auto embedded = job;
  embedded.insert(embedded.end(), {"--metrics-out", embedded_metrics});
  auto e = run_baton(embedded);
  ASSERT_EQ(e.exit_code, 0) << e.text;

  auto checkpoints = dir_->path() + "/checkpoints";
  auto over_hosts = job;
  over_hosts.insert(over_hosts.end(),
                    {"--set", "nodes.0={name: h1, host: " + host_ip_ + ", port: " +
                                std::to_string(p1) + "}",
                     "--set", "nodes.1={name: h2, host: " + ns_ip_ + ", port: " +
                                std::to_string(p2) + "}",
                     "--set", "runtime.checkpoint_dir=" + checkpoints, "--metrics-out",
                     dir_->path() + "/hosts.json"});
  // Take the link down once the last stage checkpointed step 8 (of 32).
  std::thread cut([&] {
    auto marker = fs::path(checkpoints) / "stage2" / "step-000000000008.ckpt";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (!fs::exists(marker) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    sh("ip link set " + host_if_ + " down");
  });
  auto run = run_baton(over_hosts);
  cut.join();
  ASSERT_EQ(run.exit_code, 0) << run.text;
  auto metrics = read_json(dir_->path() + "/hosts.json");
  EXPECT_EQ(digests_by_actor(metrics), digests_by_actor(read_json(embedded_metrics)));
  ASSERT_EQ(metrics.at("faults").size(), 1u) << run.text;
  const auto& f = metrics.at("faults")[0];
  EXPECT_EQ(f.at("kind"), "node_lost");
  EXPECT_EQ(f.at("target"), "h2");
  for (const auto& a : metrics.at("actors"))
    EXPECT_EQ(a.at("node"), "h1") << a.at("name");
}
