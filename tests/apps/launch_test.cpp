// `baton launch` end to end: three real processes on 127.0.0.1, told who
// they are as torchrun tells them (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), by the real torchrun of Debian's python3-torch, by a
// hostfile, and with certificates per host (--tls-dir); a lost rank (rank 0
// too) ends every process, and a restart resumes from the checkpoints.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "tests/support/baton_process.hpp"
#include "tests/support/commands.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/jobs.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/python_torch.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/text.hpp"

using namespace baton::testing;
using namespace std::chrono_literals;

namespace {

/// Whether `port` of 127.0.0.1 can be listened on now.
bool free_port(uint16_t port, uint16_t* chosen = nullptr) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0;
  if (chosen != nullptr)
    *chosen = ntohs(a.sin_port);
  ::close(fd);
  return ok;
}

/// A MASTER_PORT chosen by the OS whose next port (the rendezvous) is free too.
uint16_t master_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    uint16_t port = 0;
    if (free_port(0, &port) && port < 65535 && free_port(static_cast<uint16_t>(port + 1)))
      return port;
  }
  ADD_FAILURE() << "no two free ports in a row";
  return 0;
}

/// The short pipeline job of the end-to-end suites as `baton launch` arguments.
std::vector<std::string> launch_job(int epochs) {
  auto args = short_pipeline_job(epochs);
  args[0] = "launch";
  return args;
}

/// Environment variables by name.
using variables = std::map<std::string, std::string>;

/// Sets `vars` for the processes started while it lives.
class scoped_variables {
public:
  explicit scoped_variables(variables vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_)
      ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_variables() {
    for (const auto& entry : vars_)
      ::unsetenv(entry.first.c_str());
  }
  scoped_variables(const scoped_variables&) = delete;
  scoped_variables& operator=(const scoped_variables&) = delete;

private:
  variables vars_;
};

/// What torchrun tells rank R of `world` processes on this machine.
variables torchrun_variables(int rank, int world, uint16_t port) {
  return {{"RANK", std::to_string(rank)},      {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)}, {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}};
}

/// The arguments of rank R's `baton launch`, and its environment.
using rank_args = std::function<std::vector<std::string>(int rank)>;
using rank_variables = std::function<variables(int rank)>;

/// Three `baton launch` processes, rank R with the arguments `args(R)` and
/// the variables `vars(R)` (default: torchrun's), rank 0 also writing `metrics`.
std::vector<std::unique_ptr<baton_process>> start_ranks(const scratch_dir& dir,
                                                        const rank_args& args,
                                                        const std::string& metrics,
                                                        const std::string& name,
                                                        rank_variables vars = nullptr) {
  if (!vars)
    vars = [port = master_port()](int rank) { return torchrun_variables(rank, 3, port); };
  std::vector<std::unique_ptr<baton_process>> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    scoped_variables env{vars(rank)};
    auto own = rank == 0 && !metrics.empty() ? with(args(rank), {"--metrics-out", metrics})
                                             : args(rank);
    ranks.push_back(std::make_unique<baton_process>(
      own, dir.path() + "/" + name + "-rank" + std::to_string(rank) + ".log"));
  }
  return ranks;
}

/// The same with the same arguments on every rank.
std::vector<std::unique_ptr<baton_process>> start_ranks(const scratch_dir& dir,
                                                        const std::vector<std::string>& args,
                                                        const std::string& metrics,
                                                        const std::string& name) {
  return start_ranks(dir, [&](int) { return args; }, metrics, name);
}

/// Waits for every rank; each one's exit code.
std::vector<int> exit_codes(std::vector<std::unique_ptr<baton_process>>& ranks) {
  std::vector<int> codes;
  for (auto& r : ranks)
    codes.push_back(r->wait_for(5min));
  return codes;
}

std::string outputs(std::vector<std::unique_ptr<baton_process>>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += "--- rank " + std::to_string(i) + ":\n" + ranks[i]->output();
  return text;
}

/// This machine's host name, as `baton launch` reads it.
std::string this_host() {
  char name[256] = {0};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string{name} : std::string{};
}

double test_accuracy(const nlohmann::json& metrics) {
  return metrics.at("heads").at(0).at("test_accuracy").get<double>();
}

class launch : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<scratch_dir>("launch");
    embedded_ = run_job(*dir_, short_pipeline_job(2), "embedded");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  static inline std::unique_ptr<scratch_dir> dir_;
  static inline nlohmann::json embedded_;
};

} // namespace

// Three processes told who they are by torchrun's variables: rank 0 runs
// the job over the three nodes (its own too) and every process ends with
// its exit code; the weights and accuracy are the embedded run's.
TEST_F(launch, three_ranks_from_torchrun_variables_equal_the_embedded_run) {
  auto metrics = dir_->path() + "/ranks.json";
  auto ranks = start_ranks(*dir_, launch_job(2), metrics, "ranks");
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0, 0})) << outputs(ranks);
  auto launched = read_json(metrics);
  ASSERT_FALSE(launched.is_discarded()) << outputs(ranks);
  EXPECT_EQ(digests_by_actor(launched, "pipeline_stage"),
            digests_by_actor(embedded_, "pipeline_stage"));
  ASSERT_EQ(digests_by_actor(launched, "pipeline_stage").size(), 3u);
  EXPECT_EQ(test_accuracy(launched), test_accuracy(embedded_));
  // The three nodes are the ranks' (n0, n1, n2), and the coordinator.
  EXPECT_EQ(launched.at("nodes").size(), 4u);
  EXPECT_TRUE(contains(ranks[1]->output(), "rank 1 of 3 (RANK, WORLD_SIZE)")) << outputs(ranks);
}

// The real torchrun (Debian's python3-torch) starts the three ranks.
TEST_F(launch, torchrun_starts_the_ranks_and_the_run_equals_the_embedded_run) {
  const std::string& python = python_with_torch();
  if (python.empty())
    GTEST_SKIP() << "no python3 that can import torch (install Debian's python3-torch): "
                    "torchrun is not here";
  auto metrics = dir_->path() + "/torchrun.json";
  // --redirects 1 --tee 1: with the defaults torchrun 1.13 on Python 3.11
  // dies before any worker starts (AttributeError in to_map).
  auto command = "timeout 600 " + python + " -m torch.distributed.run --nproc_per_node 3 "
                 "--redirects 1 --tee 1 --master_port " + std::to_string(master_port()) +
                 " --no_python " + baton_command(with(launch_job(2), {"--metrics-out", metrics}));
  auto torchrun = run_shell(command);
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.text;
  auto launched = read_json(metrics);
  ASSERT_FALSE(launched.is_discarded()) << torchrun.text;
  EXPECT_EQ(digests_by_actor(launched, "pipeline_stage"),
            digests_by_actor(embedded_, "pipeline_stage"));
  EXPECT_EQ(test_accuracy(launched), test_accuracy(embedded_));
}

// A rank SIGKILLed after the first checkpoints ends the other two with a
// non-zero code (the launcher's restart policy takes over from there); the
// same three commands again resume the run from its checkpoints and end
// with the weights of the run that was never killed. The restart, given no
// --metrics-out, writes the metrics the first command asked for.
TEST_F(launch, a_lost_rank_ends_every_rank_and_a_restart_resumes) {
  auto checkpoints = dir_->path() + "/checkpoints";
  auto job = with(launch_job(2), {"--set", "runtime.checkpoint_dir=" + checkpoints});
  auto metrics = dir_->path() + "/restarted.json";
  {
    auto ranks = start_ranks(*dir_, job, metrics, "killed");
    // stage2 checkpoints a step first: with its step 8, every stage has step 4.
    ASSERT_TRUE(ranks[0]->await_file(checkpoints + "/stage2/step-000000000008.ckpt", 5min))
      << outputs(ranks);
    ranks[1]->signal(SIGKILL);
    auto codes = exit_codes(ranks);
    EXPECT_EQ(codes[1], 128 + SIGKILL);
    EXPECT_EQ(codes[0], 1) << outputs(ranks);
    EXPECT_EQ(codes[2], 1) << outputs(ranks);
    EXPECT_TRUE(contains(ranks[0]->output(), "lost rank 1 (its process ended)")) << outputs(ranks);
    EXPECT_TRUE(contains(ranks[2]->output(), "rank 0 ended the job with exit code 1"))
      << outputs(ranks);
  }
  std::filesystem::remove(metrics);
  auto ranks = start_ranks(*dir_, job, "", "restarted");
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0, 0})) << outputs(ranks);
  EXPECT_TRUE(contains(ranks[0]->output(), "which did not finish: resuming it")) << outputs(ranks);
  auto resumed = read_json(metrics);
  ASSERT_FALSE(resumed.is_discarded()) << outputs(ranks);
  EXPECT_EQ(digests_by_actor(resumed, "pipeline_stage"),
            digests_by_actor(embedded_, "pipeline_stage"));
}

// With --tls-dir, certificates from `baton certs` named after the nodes:
// rank 0 without --name is named after its host (this machine's hostname),
// the two others stand for two more hosts with --name n1 and n2. The nodes
// and the job speak mutual TLS, and the run is the embedded run.
TEST_F(launch, tls_with_a_certificate_per_host_equals_the_embedded_run) {
  const auto certs = dir_->path() + "/certs";
  const auto host = this_host();
  for (const auto& command :
       std::vector<std::vector<std::string>>{{"certs", "init", certs},
                                             {"certs", "issue", host, "--dir", certs},
                                             {"certs", "issue", "n1", "--dir", certs},
                                             {"certs", "issue", "n2", "--dir", certs}}) {
    auto made = run_baton(command);
    ASSERT_EQ(made.exit_code, 0) << made.text;
  }
  auto metrics = dir_->path() + "/tls.json";
  auto ranks = start_ranks(
    *dir_,
    [&](int rank) {
      auto args = with(launch_job(2), {"--tls-dir", certs});
      return rank == 0 ? args : with(args, {"--name", "n" + std::to_string(rank)});
    },
    metrics, "tls");
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0, 0})) << outputs(ranks);
  auto launched = read_json(metrics);
  ASSERT_FALSE(launched.is_discarded()) << outputs(ranks);
  EXPECT_EQ(digests_by_actor(launched, "pipeline_stage"),
            digests_by_actor(embedded_, "pipeline_stage"));
  EXPECT_TRUE(contains(launched.at("nodes").dump(), "\"" + host + "\"")) << launched.at("nodes");
  for (auto& rank : ranks)
    EXPECT_FALSE(contains(rank->output(), "no TLS")) << outputs(ranks);
  // Three ranks of one host, all named after it, would share its certificate.
  auto shared = start_ranks(*dir_, with(launch_job(1), {"--tls-dir", certs}),
                            dir_->path() + "/shared.json", "shared");
  EXPECT_EQ(exit_codes(shared)[0], 2) << outputs(shared);
  EXPECT_TRUE(contains(shared[0]->output(), "both name their node '" + host + "'"))
    << outputs(shared);
}

// A hostfile of one line, this host with 3 slots, as pdsh or a script over
// ssh would use it: the world size, rank 0's host and each rank (its slot,
// from LOCAL_RANK) come from the file. --insecure: where the host name is
// not a loopback address (a container's), the nodes listen on every
// interface.
TEST_F(launch, a_hostfile_gives_the_ranks_and_the_run_equals_the_embedded_run) {
  auto hostfile = dir_->path() + "/hostfile";
  ASSERT_EQ(run_shell("echo " + quote(this_host() + " slots=3") + " > " + quote(hostfile))
              .exit_code,
            0);
  auto metrics = dir_->path() + "/hostfile.json";
  const auto port = std::to_string(master_port() + 1);
  auto ranks = start_ranks(
    *dir_,
    [&](int) {
      return with(launch_job(2), {"--hostfile", hostfile, "--rendezvous-port", port,
                                  "--insecure"});
    },
    metrics, "hostfile", [](int rank) { return variables{{"LOCAL_RANK", std::to_string(rank)}}; });
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0, 0})) << outputs(ranks);
  auto launched = read_json(metrics);
  ASSERT_FALSE(launched.is_discarded()) << outputs(ranks);
  EXPECT_EQ(digests_by_actor(launched, "pipeline_stage"),
            digests_by_actor(embedded_, "pipeline_stage"));
  EXPECT_TRUE(contains(ranks[2]->output(), "rank 2 of 3 (the hostfile's line of " + this_host() +
                                             " + LOCAL_RANK, the hostfile's slots)"))
    << outputs(ranks);
}

// Rank 0 SIGKILLed while the job runs: the two others see its rendezvous
// connection close and end with exit code 1 at once.
TEST_F(launch, a_lost_rank_0_ends_the_other_ranks) {
  auto ranks = start_ranks(*dir_, launch_job(2), dir_->path() + "/lost0.json", "lost0");
  ASSERT_TRUE(ranks[1]->await_output("spawned pipeline_stage", 5min)) << outputs(ranks);
  ranks[0]->signal(SIGKILL);
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{128 + SIGKILL, 1, 1})) << outputs(ranks);
  for (int rank : {1, 2})
    EXPECT_TRUE(contains(ranks[rank]->output(), "lost rank 0: its connection closed"))
      << outputs(ranks);
}

// Who is who must be known and consistent before anything starts.
TEST_F(launch, incomplete_or_contradictory_launches_are_refused) {
  auto job = launch_job(1);
  auto nobody = run_shell("env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_SIZE -u SLURM_NTASKS " +
                          baton_command(job));
  EXPECT_EQ(nobody.exit_code, 2) << nobody.text;
  EXPECT_TRUE(contains(nobody.text, "the world size is not known: set one of --world-size, "
                                    "WORLD_SIZE (torchrun, PyTorchJob)"))
    << nobody.text;
  auto past = run_baton(with(job, {"--rank", "3", "--world-size", "3", "--master-addr",
                                   "127.0.0.1"}));
  EXPECT_EQ(past.exit_code, 2) << past.text;
  EXPECT_TRUE(contains(past.text, "--rank is '3': expected an integer from 0 to 2")) << past.text;
  auto hostfile = dir_->path() + "/hosts.txt";
  ASSERT_EQ(run_shell("printf 'h0 slots=2\\nh1 slots=two\\n' > " + quote(hostfile)).exit_code, 0);
  auto bad_hostfile = run_baton(with(job, {"--hostfile", hostfile}));
  EXPECT_EQ(bad_hostfile.exit_code, 2) << bad_hostfile.text;
  EXPECT_TRUE(contains(bad_hostfile.text, hostfile + ":2: expected `host` or `host slots=N`"))
    << bad_hostfile.text;
  auto missing = run_baton({"launch", dir_->path() + "/none.yaml", "--rank", "0",
                            "--world-size", "1"});
  EXPECT_EQ(missing.exit_code, 2) << missing.text;
}

// -- issue 32 --------------------------------------------------------------------

namespace {

/// A connection to 127.0.0.1:`port`, retried for up to a minute (rank 0
/// listens once its node has started); -1 when none was made.
int connect_when_listening(uint16_t port) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
      return fd;
    ::close(fd);
    ::usleep(100 * 1000);
  }
  return -1;
}

/// torchrun's variables for rank R of `world` with the run id `job`.
variables job_variables(int rank, int world, uint16_t port, const std::string& job) {
  auto vars = torchrun_variables(rank, world, port);
  vars["TORCHELASTIC_RUN_ID"] = job;
  return vars;
}

/// `baton launch ARGS` as rank R of `world` of job `job`, logging to NAME.log.
std::unique_ptr<baton_process> start_rank(const scratch_dir& dir, std::vector<std::string> args,
                                          int rank, int world, uint16_t port,
                                          const std::string& job, const std::string& name) {
  scoped_variables env{job_variables(rank, world, port, job)};
  return std::make_unique<baton_process>(args, dir.path() + "/" + name + ".log");
}

} // namespace

// Item 5: a rank whose node cannot start (beyond loopback without TLS or
// --insecure, on every interface, certificates that are not there) used to
// print the right error and then abort on std::future_error (exit 134).
TEST_F(launch, a_node_that_cannot_start_ends_the_rank_with_its_error_and_exit_2) {
  const auto job = launch_job(1);
  for (const auto& extra : std::vector<std::vector<std::string>>{
         {"--rank", "0", "--world-size", "2", "--master-addr", "192.0.2.1"},
         {"--rank", "0", "--world-size", "1", "--host", "0.0.0.0"},
         {"--rank", "0", "--world-size", "1", "--tls-dir", dir_->path() + "/no-such-dir"}}) {
    auto out = run_baton(with(job, extra));
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_FALSE(contains(out.text, "future_error")) << out.text;
    EXPECT_FALSE(contains(out.text, "terminate called")) << out.text;
  }
}

// Item 9: an HTTP probe at the rendezvous port used to end rank 0 (exit 2),
// and a rank of another job on the same port took a rank's place. Now the
// probe is logged and ignored, the other job's rank is refused (exit 2,
// told why), and the job runs with its own ranks.
TEST_F(launch, garbage_and_another_jobs_rank_at_the_rendezvous_do_not_end_the_job) {
  const auto port = master_port();
  const auto metrics = dir_->path() + "/probed.json";
  std::vector<std::unique_ptr<baton_process>> ranks;
  ranks.push_back(start_rank(*dir_, with(launch_job(1), {"--metrics-out", metrics}), 0, 3, port,
                             "job-a", "probed-rank0"));
  int probe = connect_when_listening(static_cast<uint16_t>(port + 1));
  ASSERT_GE(probe, 0) << outputs(ranks);
  const std::string http = "GET / HTTP/1.0\r\n\r\n";
  ::send(probe, http.data(), http.size(), MSG_NOSIGNAL);
  auto stranger = start_rank(*dir_, launch_job(1), 1, 3, port, "job-b", "probed-stranger");
  EXPECT_EQ(stranger->wait_for(3min), 2) << stranger->output() << outputs(ranks);
  EXPECT_TRUE(contains(stranger->output(), "rank 1 of job job-b, but this rank 0 runs job job-a"))
    << stranger->output();
  for (int rank : {1, 2})
    ranks.push_back(start_rank(*dir_, launch_job(1), rank, 3, port, "job-a",
                               "probed-rank" + std::to_string(rank)));
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0, 0})) << outputs(ranks);
  ::close(probe);
  EXPECT_TRUE(contains(ranks[0]->output(), "ignored a connection from 127.0.0.1"))
    << outputs(ranks);
  EXPECT_TRUE(contains(ranks[0]->output(), "job job-a (TORCHELASTIC_RUN_ID)")) << outputs(ranks);
}

// Item 9: when rank 0 gives up (a rank never came: exit 2, a node that
// cannot be reached), the rank that did register is told why and ends at
// once, with rank 0's exit code.
TEST_F(launch, when_rank_0_gives_up_the_registered_ranks_end_with_its_reason) {
  const auto port = master_port();
  std::vector<std::unique_ptr<baton_process>> ranks;
  for (int rank : {0, 1})
    ranks.push_back(start_rank(*dir_, with(launch_job(1), {"--rendezvous-timeout", "5"}), rank,
                               3, port, "job-c", "gave-up-rank" + std::to_string(rank)));
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{2, 2})) << outputs(ranks);
  EXPECT_TRUE(contains(ranks[1]->output(), "rank 0 gave up: 1 of 2 ranks did not register "
                                           "within 5 s"))
    << outputs(ranks);
  EXPECT_FALSE(contains(ranks[1]->output(), "lost rank 0")) << outputs(ranks);
}

// Item 20: a data-parallel job on npy files used to fail on rank 0 until
// data.shape and data.classes were given, with a message about "the
// source's node" (a data-parallel job has none): rank 0 reads the files'
// headers as `baton run` does, and the job runs.
TEST_F(launch, a_data_parallel_job_on_npy_files_needs_no_declared_shape) {
  const auto d = dir_->path() + "/npy";
  std::filesystem::create_directories(d);
  write_npy_pair(d + "/x_train.npy", d + "/y_train.npy", make_samples(256, 3, 8, 8, 10, 3));
  write_npy_pair(d + "/x_test.npy", d + "/y_test.npy", make_samples(64, 3, 8, 8, 10, 4));
  const auto topology = d + "/dp-npy.yaml";
  std::ofstream(topology) << "job: data-parallel\nseed: 42\n"
                             "data:\n"
                             "  kind: npy\n"
                             "  train: {x: x_train.npy, y: y_train.npy}\n"
                             "  test: {x: x_test.npy, y: y_test.npy}\n"
                             "  batch_size: 32\n"
                             "  epochs: 1\n"
                             "backbone: {checkpoint: none}\n"
                             "data_parallel: {workers: 2, model: convnet, "
                             "optimizer: {lr: 0.02, momentum: 0.9}}\n"
                             "tasks:\n"
                             "  - {name: all10, labels: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
                             "task: all10\n";
  const auto port = master_port();
  const auto metrics = dir_->path() + "/dp-npy.json";
  std::vector<std::unique_ptr<baton_process>> ranks;
  for (int rank : {0, 1})
    ranks.push_back(start_rank(*dir_,
                               rank == 0 ? std::vector<std::string>{"launch", topology,
                                                                    "--metrics-out", metrics}
                                         : std::vector<std::string>{"launch", topology},
                               rank, 2, port, "job-npy", "dp-npy-rank" + std::to_string(rank)));
  EXPECT_EQ(exit_codes(ranks), (std::vector<int>{0, 0})) << outputs(ranks);
  EXPECT_FALSE(contains(outputs(ranks), "source's node")) << outputs(ranks);
  auto launched = read_json(metrics);
  ASSERT_FALSE(launched.is_discarded()) << outputs(ranks);
  EXPECT_EQ(launched.at("heads").at(0).at("samples").get<int64_t>(), 256) << launched.dump();
}
