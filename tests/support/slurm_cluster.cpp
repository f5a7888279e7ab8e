#include "tests/support/slurm_cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>
#include <sstream>
#include <thread>

#include "tests/support/text.hpp"

extern char** environ;

namespace baton::testing {

namespace {

/// What the cluster runs; each must be installed.
const std::vector<std::string> slurm_programs{"munged",  "munge",  "unmunge", "slurmctld",
                                              "slurmd",  "srun",   "sbatch",  "sinfo",
                                              "squeue",  "scancel"};

/// The absolute path of `program` in $PATH or the sbin directories (where
/// Debian puts the daemons, not in a user's $PATH); "" when it is not there.
std::string find_program(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = std::string{path != nullptr ? path : ""} + ":/usr/sbin:/sbin";
  std::istringstream in{dirs};
  for (std::string dir; std::getline(in, dir, ':');) {
    auto candidate = dir + "/" + program;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return {};
}

/// A fresh munge key of 1024 random bytes at `path`, readable by its owner
/// only (munged refuses any other mode); "" or why not.
std::string write_munge_key(const std::string& path) {
  std::ifstream random{"/dev/urandom", std::ios::binary};
  std::string key(1024, '\0');
  random.read(key.data(), static_cast<std::streamsize>(key.size()));
  std::ofstream out{path, std::ios::binary};
  out.write(key.data(), static_cast<std::streamsize>(key.size()));
  out.close();
  if (!random || !out || ::chmod(path.c_str(), 0400) != 0)
    return "cannot write the munge key " + path + ": " + std::strerror(errno);
  return {};
}

/// slurm.conf for one node, `localhost` at 127.0.0.1, every path under `dir`.
/// config_overrides: slurmd announces `cpus` CPUs however many the machine
/// has, so that `srun -n 3` runs on a 2-core CI machine.
std::string slurm_config(const std::string& dir, const std::string& munge_socket,
                         const std::vector<uint16_t>& ports, int cpus) {
  std::ostringstream c;
  c << "# written by tests/support/slurm_cluster.cpp\n"
    << "ClusterName=baton-test\n"
    << "SlurmctldHost=localhost(127.0.0.1)\n"
    << "SlurmUser=root\nSlurmdUser=root\n"
    << "AuthType=auth/munge\nCredType=cred/munge\n"
    << "AuthInfo=socket=" << munge_socket << "\n"
    << "SlurmctldPort=" << ports[0] << "\nSlurmdPort=" << ports[1] << "\n"
    << "StateSaveLocation=" << dir << "/state\n"
    << "SlurmdSpoolDir=" << dir << "/spool\n"
    << "SlurmctldPidFile=" << dir << "/slurmctld.pid\n"
    << "SlurmdPidFile=" << dir << "/slurmd.pid\n"
    << "SlurmctldLogFile=" << dir << "/slurmctld.log\n"
    << "SlurmdLogFile=" << dir << "/slurmd.log\n"
    << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
    << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
    << "ReturnToService=2\nSlurmdParameters=config_overrides\n"
    << "NodeName=localhost NodeAddr=127.0.0.1 CPUs=" << cpus
    << " RealMemory=1000 State=UNKNOWN\n"
    << "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP "
       "OverSubscribe=FORCE:4\n";
  return c.str();
}

/// This process's environment without any SLURM_* variable, plus SLURM_CONF.
std::vector<std::string> daemon_environment(const std::string& config) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "SLURM_", 6) != 0)
      out.emplace_back(*e);
  out.push_back("SLURM_CONF=" + config);
  return out;
}

/// Pointers to `strings`, ended by a null pointer, for execve.
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// The last `lines` lines of `text`.
std::string tail(const std::string& text, int lines) {
  size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n')
    --at;
  for (int n = 0; n < lines && at != std::string::npos && at > 0; ++n)
    at = text.rfind('\n', at - 1);
  return at == std::string::npos || at == 0 ? text : text.substr(at + 1);
}

/// Waits up to `limit` for the child `pid` to end; whether it did.
bool reaped_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  do {
    if (::waitpid(pid, nullptr, WNOHANG) != 0)
      return true; // ended, or not our child any more
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

} // namespace

namespace {

/// The first port of the range the OS hands out for bind(0) and connect
/// (/proc/sys/net/ipv4/ip_local_port_range; Linux's default 32768).
int ephemeral_start() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  int first = 0;
  return in >> first && first > 1024 ? first : 32768;
}

/// A socket bound to `port` on every address (0: the OS picks), and the
/// port it got; -1 when the port is taken.
std::pair<int, uint16_t> bound_socket(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return {-1, 0};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  socklen_t length = sizeof address;
  if (::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(s);
    return {-1, 0};
  }
  return {s, ntohs(address.sin_port)};
}

} // namespace

std::vector<uint16_t> free_tcp_ports(size_t count) {
  // Below the ephemeral range where it has room: a port the OS handed out
  // for bind(0) and that is closed again can go to any process of a suite
  // running beside this one (a node's listener, a connection) before the
  // job binds it, as sbatch's rank 0 once found in `ctest -j2` ("address in
  // use"); the OS never hands out these, so only a bind to the port itself
  // can take it. Each is still checked free by binding it.
  const int below = ephemeral_start();
  const int first = std::min(20000, below / 2);
  std::mt19937 pick{std::random_device{}()};
  std::vector<int> sockets;
  std::vector<uint16_t> ports;
  for (int tries = 0; ports.size() < count && tries < 200 && below - first > 100; ++tries) {
    auto [s, port] = bound_socket(static_cast<uint16_t>(
      std::uniform_int_distribution<int>{first, below - 1}(pick)));
    if (s < 0)
      continue;
    sockets.push_back(s); // held open until all are bound: the ports differ
    ports.push_back(port);
  }
  while (ports.size() < count) { // no room below: the OS's choice
    auto [s, port] = bound_socket(0);
    if (s < 0)
      break;
    sockets.push_back(s);
    ports.push_back(port);
  }
  for (int s : sockets)
    ::close(s);
  return ports.size() == count ? ports : std::vector<uint16_t>{};
}

std::string slurm_unavailable() {
  if (::geteuid() != 0)
    return "a Slurm cluster needs root (slurmd starts every task as its user); run the test as "
           "root, as CI does";
  for (const auto& program : slurm_programs)
    if (find_program(program).empty())
      return "'" + program + "' is not installed: scripts/install-deps.sh installs slurm-wlm "
             "and munge (apt-get install slurm-wlm munge)";
  return {};
}

slurm_cluster::slurm_cluster(std::string dir, int cpus, std::chrono::seconds limit)
  : dir_(std::move(dir)), config_(dir_ + "/slurm.conf"),
    munge_socket_(dir_ + "/munge/munge.socket") {
  failure_ = slurm_unavailable();
  if (!failure_.empty())
    return;
  failure_ = start(cpus, limit);
  if (!failure_.empty())
    failure_ += "\n" + logs();
}

slurm_cluster::~slurm_cluster() { stop(); }

std::string slurm_cluster::start(int cpus, std::chrono::seconds limit) {
  const std::string munge = dir_ + "/munge";
  for (const auto& sub : {munge, dir_ + "/state", dir_ + "/spool"})
    if (::mkdir(sub.c_str(), 0755) != 0)
      return "cannot make " + sub + ": " + std::strerror(errno);
  if (auto error = start_guard(); !error.empty())
    return error;
  if (auto error = write_munge_key(munge + "/munge.key"); !error.empty())
    return error;
  auto error = spawn("munged",
                     {find_program("munged"), "--foreground", "--force",
                      "--socket=" + munge_socket_, "--key-file=" + munge + "/munge.key",
                      "--log-file=" + munge + "/munged.log", "--pid-file=" + munge + "/munged.pid",
                      "--seed-file=" + munge + "/munged.seed"},
                     munge + "/munged.log");
  const std::string credential = quote(find_program("munge")) + " -n -S " + quote(munge_socket_) +
                                 " | " + quote(find_program("unmunge")) + " -S " +
                                 quote(munge_socket_);
  if (error.empty())
    error = await("a munge credential that unmunge accepts",
                  [&] { return run(credential, 10).exit_code == 0; }, limit);
  if (!error.empty())
    return error;
  auto ports = free_tcp_ports(2);
  if (ports.empty())
    return "the OS gave no free TCP port for slurmctld and slurmd";
  std::ofstream{config_} << slurm_config(dir_, munge_socket_, ports, cpus);
  error = spawn("slurmctld", {find_program("slurmctld"), "-D", "-f", config_},
                dir_ + "/slurmctld.log");
  if (error.empty())
    error = spawn("slurmd", {find_program("slurmd"), "-D", "-f", config_, "-N", "localhost"},
                  dir_ + "/slurmd.log");
  if (error.empty())
    error = await("the node `localhost` idle in `sinfo`",
                  [&] { return run("sinfo -h -n localhost -o %T", 10).text == "idle\n"; }, limit);
  return error;
}

std::string slurm_cluster::spawn(const std::string& name, const std::vector<std::string>& argv,
                                 const std::string& log) {
  const std::string out_path = dir_ + "/" + name + ".out";
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0)
    return "cannot open " + out_path + " or /dev/null: " + std::strerror(errno);
  auto args = argv;
  auto env = daemon_environment(config_);
  auto arg_pointers = pointers(args);
  auto env_pointers = pointers(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) { // only async-signal-safe calls until execve
    ::setpgid(0, 0);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1); // the test died before prctl took effect
    ::execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(out);
  ::close(in);
  if (pid < 0)
    return "cannot fork for " + name + ": " + std::strerror(fork_errno);
  daemons_.push_back({name, pid, {log, out_path}});
  return {};
}

std::string slurm_cluster::start_guard() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0)
    return std::string{"cannot make the guard's pipe: "} + std::strerror(errno);
  // grep -z -x -F: one whole NUL-separated entry of /proc/PID/environ, as text.
  std::vector<std::string> argv{
    "/bin/sh", "-c",
    "read -r _; for p in /proc/[0-9]*; do grep -qzxF \"SLURM_CONF=$0\" \"$p/environ\" "
    "2>/dev/null && kill -KILL \"${p#/proc/}\" 2>/dev/null; done; exit 0",
    config_};
  auto arg_pointers = pointers(argv);
  const pid_t pid = ::fork();
  if (pid == 0) { // only async-signal-safe calls until execve
    ::setpgid(0, 0); // a signal to the test's group does not reach it
    ::dup2(ends[0], STDIN_FILENO);
    ::execve(arg_pointers[0], arg_pointers.data(), environ);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(ends[0]);
  if (pid < 0) {
    ::close(ends[1]);
    return std::string{"cannot fork the guard: "} + std::strerror(fork_errno);
  }
  guard_ = pid;
  guard_pipe_ = ends[1];
  return {};
}

void slurm_cluster::stop_guard() {
  if (guard_pipe_ >= 0)
    ::close(guard_pipe_);
  guard_pipe_ = -1;
  if (guard_ > 0 && !reaped_within(guard_, std::chrono::seconds(30))) {
    ::kill(guard_, SIGKILL);
    ::waitpid(guard_, nullptr, 0);
  }
  guard_ = -1;
}

template <class Ready>
std::string slurm_cluster::await(const std::string& what, Ready ready,
                                 std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (auto ended = ended_daemon(); !ended.empty())
      return ended + " while waiting for " + what;
    if (std::chrono::steady_clock::now() >= deadline)
      return "no " + what + " after " + std::to_string(limit.count()) + " s";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return {};
}

std::string slurm_cluster::ended_daemon() {
  for (auto& d : daemons_) {
    int status = 0;
    if (d.pid > 0 && ::waitpid(d.pid, &status, WNOHANG) == d.pid) {
      d.pid = -1;
      return d.name + " ended (" +
             (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status))) +
             ")";
    }
  }
  return {};
}

command_output slurm_cluster::run(const std::string& command, int seconds) const {
  // Unset every SLURM_* variable (a test started inside a Slurm job), then
  // point Slurm's commands at this cluster.
  return run_shell("cd " + quote(dir_) +
                   " && unset $(env | sed -n 's/^\\(SLURM_[A-Za-z0-9_]*\\)=.*/\\1/p')" +
                   " && export SLURM_CONF=" + quote(config_) + " && timeout -k 10 " +
                   std::to_string(seconds) + " sh -c " + quote(command) + " </dev/null 2>&1");
}

std::string slurm_cluster::logs(int lines) const {
  std::string out;
  for (const auto& d : daemons_)
    for (const auto& log : d.logs)
      out += "-- " + d.name + ": " + log + " (its last " + std::to_string(lines) +
             " lines) --\n" + tail(read_text(log), lines) + "\n";
  return out;
}

void slurm_cluster::cancel_jobs() const {
  bool controller = std::any_of(daemons_.begin(), daemons_.end(), [](const daemon& d) {
    return d.name == "slurmctld" && d.pid > 0;
  });
  if (!controller)
    return;
  run("squeue -h -o %i | xargs -r scancel", 30);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!run("squeue -h -o %i", 10).text.empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

void slurm_cluster::stop() {
  while (!ended_daemon().empty()) {
  } // reaps the daemons that ended on their own
  cancel_jobs();
  for (auto d = daemons_.rbegin(); d != daemons_.rend(); ++d) {
    if (d->pid <= 0)
      continue;
    ::kill(d->pid, SIGTERM);
    if (!reaped_within(d->pid, std::chrono::seconds(15))) {
      ::kill(-d->pid, SIGKILL);
      ::waitpid(d->pid, nullptr, 0);
    }
    d->pid = -1;
  }
  stop_guard();
}

} // namespace baton::testing
