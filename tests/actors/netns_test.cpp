// Nodes on two "hosts": one node in this network namespace, one in its own
// (`ip netns`), joined by a veth pair shaped with `tc` (netem delay, or a
// tbf bandwidth limit where the kernel has no netem), so that the
// traffic between them crosses a real network stack. Taking the link down
// mid-run shows detection (heartbeats) and recovery across hosts. Needs
// root (CAP_NET_ADMIN); skipped with a clear message elsewhere.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/actors/baton_process.hpp"

using namespace baton::testing;
namespace fs = std::filesystem;

namespace {

/// Runs a shell command; true when it exited 0.
bool sh(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

/// A `baton node` started with `prefix` (e.g. "ip netns exec NS"), stopped
/// (SIGKILL) when this goes out of scope.
class node_process {
public:
  node_process(const std::string& prefix, const std::string& name, const std::string& host,
               const std::string& dir) {
    port_file_ = dir + "/" + name + ".port";
    auto command = prefix + " " + quote(BATON_BINARY) + " node --name " + name + " --host " +
                   host + " --insecure --port 0 --port-file " + quote(port_file_) +
                   " --heartbeat-ms 200" +
                   " --connection-timeout-ms 2000 > " + quote(dir + "/" + name + ".log") + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), nullptr);
      ::_exit(127);
    }
  }
  ~node_process() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  /// The port it listens on, once it wrote it (0 after 30 s without).
  int port() const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in{port_file_};
      int port = 0;
      if (in >> port && port > 0)
        return port;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }

private:
  pid_t pid_ = -1;
  std::string port_file_;
};

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
    dir_ = temp_dir("netns");
  }

  void TearDown() override {
    if (!created_)
      return;
    sh("ip link del " + host_if_);
    sh("ip netns del " + ns_);
  }

  std::string ns_, host_if_, ns_if_, host_ip_, ns_ip_, dir_;
  bool created_ = false;
  std::string shaping_; ///< the tc qdisc on the link

};

/// Every trainable actor's weights digest, by name.
std::map<std::string, std::string> digests(const nlohmann::json& metrics) {
  std::map<std::string, std::string> out;
  for (const auto& a : metrics.at("actors"))
    if (a.contains("weights_digest"))
      out[a.at("name").get<std::string>()] = a.at("weights_digest").get<std::string>();
  return out;
}

} // namespace

// The pipeline over both hosts equals the embedded run; then, with the link
// to host 2 taken down mid-run, the coordinator detects the lost node by its
// missing heartbeats, moves its stages to host 1 and ends with the same
// weights.
TEST_F(netns, a_link_taken_down_between_hosts_is_detected_and_recovered) {
  node_process h1("", "h1", host_ip_, dir_);
  node_process h2("ip netns exec " + ns_, "h2", ns_ip_, dir_);
  int p1 = h1.port(), p2 = h2.port();
  ASSERT_GT(p1, 0) << "node h1 did not start (see " << dir_ << "/h1.log)";
  ASSERT_GT(p2, 0) << "node h2 did not start in " << ns_ << " (see " << dir_ << "/h2.log)";

  std::vector<std::string> job{"run",   source_path("configs/pipeline.yaml"),
                               "--set", "data.train_limit=2048",
                               "--set", "data.test_limit=256",
                               "--set", "data.microbatches=2",
                               "--set", "pipeline.schedule=gpipe",
                               "--set", "runtime.checkpoint_every=4"};
  auto embedded_metrics = dir_ + "/embedded.json";
  auto embedded = job;
  embedded.insert(embedded.end(), {"--metrics-out", embedded_metrics});
  auto e = run_baton(embedded);
  ASSERT_EQ(e.exit_code, 0) << e.text;

  auto checkpoints = dir_ + "/checkpoints";
  auto over_hosts = job;
  over_hosts.insert(over_hosts.end(),
                    {"--set", "nodes.0={name: h1, host: " + host_ip_ + ", port: " +
                                std::to_string(p1) + "}",
                     "--set", "nodes.1={name: h2, host: " + ns_ip_ + ", port: " +
                                std::to_string(p2) + "}",
                     "--set", "runtime.checkpoint_dir=" + checkpoints, "--metrics-out",
                     dir_ + "/hosts.json"});
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
  auto metrics = read_json(dir_ + "/hosts.json");
  EXPECT_EQ(digests(metrics), digests(read_json(embedded_metrics)));
  ASSERT_EQ(metrics.at("faults").size(), 1u) << run.text;
  const auto& f = metrics.at("faults")[0];
  EXPECT_EQ(f.at("kind"), "node_lost");
  EXPECT_EQ(f.at("target"), "h2");
  for (const auto& a : metrics.at("actors"))
    EXPECT_EQ(a.at("node"), "h1") << a.at("name");
}
