#include "actors/runtime/emulated_hosts.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

extern char** environ;

namespace baton::actors {
inline namespace runtime {

namespace {

/// Names: namespace "baton-PID-nI", bridge "btnbrPID", veth ends
/// "btnvPIDhI" (bridge side) and "btnvPIDnI" (node side); interface names
/// have at most 15 characters (IFNAMSIZ - 1).
constexpr const char* namespace_prefix = "baton-";
constexpr const char* bridge_prefix = "btnbr";
constexpr const char* veth_prefix = "btnv";
constexpr size_t max_interface_name = 15;

/// The addresses of emulated hosts: 10.214.K.0/24, K chosen per run.
constexpr const char* subnet_prefix = "10.214.";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// "2.5mbit" -> 2.5 and "mbit"; false if there is no leading number.
bool split_number(const std::string& text, double& number, std::string& unit) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) != 0 ||
                               text[end] == '.'))
    ++end;
  if (end == 0)
    return false;
  char* used = nullptr;
  auto digits = text.substr(0, end);
  number = std::strtod(digits.c_str(), &used);
  if (used != digits.c_str() + digits.size() || !std::isfinite(number))
    return false;
  unit = lower(text.substr(end));
  return true;
}

bool parse_rate(const std::string& text, uint64_t& bits, std::string& error) {
  double number = 0;
  std::string unit;
  double scale = 0;
  if (split_number(text, number, unit))
    scale = unit == "bit" ? 1 : unit == "kbit" ? 1e3 : unit == "mbit" ? 1e6 : unit == "gbit" ? 1e9
                                                                                            : 0;
  double value = number * scale;
  if (scale == 0 || value < 1e3 || value > 1e11) {
    error = scale == 0 ? "rate '" + text + "' is not a number with bit, kbit, mbit or gbit"
                       : "rate '" + text + "' is outside 1kbit to 100gbit";
    return false;
  }
  bits = static_cast<uint64_t>(value);
  return true;
}

bool parse_delay(const std::string& text, std::chrono::microseconds& delay, std::string& error) {
  double number = 0;
  std::string unit;
  double scale = 0;
  if (split_number(text, number, unit))
    scale = unit == "us" ? 1 : unit == "ms" ? 1e3 : unit == "s" ? 1e6 : 0;
  double value = number * scale;
  if (scale == 0 || value > 10e6) {
    error = scale == 0 ? "delay '" + text + "' is not a number with us, ms or s"
                       : "delay '" + text + "' is over 10 s";
    return false;
  }
  delay = std::chrono::microseconds{static_cast<int64_t>(value)};
  return true;
}

/// The output of `ip ARGS...`; empty when it failed.
std::string ip_output(const std::string& ip, std::vector<std::string> args) {
  args.insert(args.begin(), ip);
  auto r = run_tool(args);
  return r.exit_code == 0 ? r.output : std::string{};
}

/// The first word of each line of `text`, and of "N: NAME@...:" lines NAME.
std::vector<std::string> names_in(const std::string& text, bool numbered) {
  std::vector<std::string> names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    if (numbered)
      words >> word; // "5:"
    if (!(words >> word))
      continue;
    word = word.substr(0, word.find_first_of("@:"));
    names.push_back(word);
  }
  return names;
}

/// The process id in `name` after `prefix` ("btnv4711h1" -> 4711), or -1.
pid_t pid_in(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0)
    return -1;
  size_t end = prefix.size();
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) != 0)
    ++end;
  if (end == prefix.size() || end - prefix.size() > 9)
    return -1;
  return static_cast<pid_t>(std::stol(name.substr(prefix.size(), end - prefix.size())));
}

bool process_gone(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

/// SIGKILLs every process inside namespace `name`.
void kill_inside(const std::string& ip, const std::string& name) {
  std::istringstream pids(ip_output(ip, {"netns", "pids", name}));
  for (long pid = 0; pids >> pid;)
    if (pid > 1)
      ::kill(static_cast<pid_t>(pid), SIGKILL);
}

/// A subnet number K of 10.214.K.0/24 that no interface here uses, starting
/// from one derived from this process's id (two runs at once differ).
int free_subnet(const std::string& ip) {
  auto used = ip_output(ip, {"-o", "-4", "addr", "show"});
  int first = static_cast<int>(::getpid() % 250) + 1;
  for (int k = 0; k < 250; ++k) {
    int candidate = (first + k - 1) % 250 + 1;
    if (used.find(subnet_prefix + std::to_string(candidate) + ".") == std::string::npos)
      return candidate;
  }
  return first;
}

std::string rate_text(uint64_t bits) {
  return std::to_string(bits) + "bit";
}

} // namespace

std::optional<link_spec> parse_link_spec(const std::string& text, std::string& error) {
  link_spec spec;
  spec.text = text;
  auto comma = text.find(',');
  auto rate = text.substr(0, comma);
  bool ok = !text.empty() && parse_rate(rate, spec.rate_bits, error);
  if (ok && comma != std::string::npos) {
    auto delay = text.substr(comma + 1);
    ok = delay.find(',') == std::string::npos ? parse_delay(delay, spec.delay, error)
                                              : (error = "more than RATE,DELAY", false);
  }
  if (ok)
    return spec;
  if (text.empty())
    error = "empty";
  error = "'" + text + "': " + error + "; expected " + link_spec_form;
  return std::nullopt;
}

double link_bytes_per_second(const std::string& text) {
  std::string error;
  auto link = text.empty() ? std::nullopt : parse_link_spec(text, error);
  return link ? static_cast<double>(link->rate_bits) / 8 : 0;
}

uint64_t burst_bytes(const link_spec& link) {
  return std::max<uint64_t>(64 * 1024, link.rate_bits / 8 / 100);
}

std::string find_tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    auto path = std::string{dir} + name;
    if (::access(path.c_str(), X_OK) == 0)
      return path;
  }
  return {};
}

tool_result run_tool(const std::vector<std::string>& argv) {
  tool_result result;
  int out[2];
  if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0)
    return result;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    result.output = argv[0] + ": " + std::strerror(spawned);
    return result;
  }
  char buffer[4096];
  for (ssize_t n = 0; (n = ::read(out[0], buffer, sizeof buffer)) != 0;)
    if (n > 0)
      result.output.append(buffer, static_cast<size_t>(n));
    else if (errno != EINTR)
      break;
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> remove_stale_emulated_hosts() {
  std::vector<std::string> removed;
  auto ip = find_tool("ip");
  if (ip.empty())
    return removed;
  for (const auto& name : names_in(ip_output(ip, {"netns", "list"}), false))
    if (process_gone(pid_in(name, namespace_prefix)) &&
        name.find("-n", std::strlen(namespace_prefix)) != std::string::npos) {
      kill_inside(ip, name);
      run_tool({ip, "netns", "del", name});
      removed.push_back(name);
    }
  for (const auto& name : names_in(ip_output(ip, {"-o", "link", "show"}), true))
    if (process_gone(pid_in(name, bridge_prefix)) || process_gone(pid_in(name, veth_prefix))) {
      run_tool({ip, "link", "del", name});
      removed.push_back(name);
    }
  return removed;
}

// -- emulated_hosts -------------------------------------------------------------

std::unique_ptr<emulated_hosts> emulated_hosts::create(int32_t count, const link_spec& link,
                                                       std::string& error) {
  std::unique_ptr<emulated_hosts> hosts{new emulated_hosts};
  hosts->ip_ = find_tool("ip");
  hosts->tc_ = find_tool("tc");
  if (hosts->ip_.empty() || hosts->tc_.empty()) {
    error = "--link needs the `ip` and `tc` commands (iproute2) in /usr/sbin, /sbin, /usr/bin "
            "or /bin";
    return nullptr;
  }
  int subnet = free_subnet(hosts->ip_);
  if (!hosts->add_bridge(subnet, error))
    return nullptr; // the destructor removes what was made
  for (int32_t i = 0; i < count; ++i)
    if (!hosts->add_host(i, subnet, error) || !hosts->shape(hosts->hosts_.back(), link, error))
      return nullptr;
  hosts->shaping_ = "tc tbf rate " + link.text.substr(0, link.text.find(',')) +
                    " on each end of each node's veth link";
  if (link.delay.count() > 0)
    hosts->shaping_ += hosts->netem_
                         ? ", with netem delay " + std::to_string(link.delay.count()) +
                             "us each way"
                         : "; no delay: this kernel has no netem qdisc (sch_netem), the "
                           "delay in --link " + link.text + " is not emulated";
  std::string why;
  if (hosts->use_cubic(why)) {
    hosts->shaping_ += "; TCP cubic in every emulated host";
  } else {
    spdlog::warn("--link: {}; the emulated hosts keep this machine's TCP congestion control",
                 why);
    hosts->shaping_ += "; TCP: this machine's congestion control (" + why + ")";
  }
  return hosts;
}

// TCP's congestion control in every emulated host is cubic, whatever this
// machine's default. BBR sizes its window from the shortest round trip it
// has seen, and a veth pair without delay has next to none (~10 us): with
// both directions of a node-to-node connection busy, each direction's
// acknowledgements wait in the other's tbf queue and the window caps it at
// about half the rate for much of a transfer. Measured (2026-12-02): a ring
// of 2 workers exchanging 3.25 MB each way over 100mbit (`baton run
// configs/data-parallel.yaml --set data_parallel.model=ist_mlp --set
// data_parallel.hidden=[1024] --set data.batch_size=96 --local-nodes 2
// --link 100mbit`) took 327-332 ms a step with BBR and 274-277 with cubic,
// where the link carries the bytes in 272; tcpdump showed BBR's direction
// pausing 16 ms after every ~190 kB.
//
// A namespace may only pick an algorithm of the machine's
// net.ipv4.tcp_allowed_congestion_control (the kernel's rule for every
// namespace but the first), which on a machine booted with BBR as its
// default is "reno bbr": cubic is added to that list first. Only the list
// of what may be chosen grows; the machine's own default stays.
bool emulated_hosts::use_cubic(std::string& why) const {
  const auto sysctl = find_tool("sysctl");
  if (sysctl.empty()) {
    why = "no `sysctl` command (procps)";
    return false;
  }
  const std::string allowed_key = "net.ipv4.tcp_allowed_congestion_control";
  auto allowed = run_tool({sysctl, "-n", allowed_key});
  std::string list = allowed.output.substr(0, allowed.output.find('\n'));
  if (allowed.exit_code == 0 && (" " + list + " ").find(" cubic ") == std::string::npos) {
    auto r = run_tool({sysctl, "-qw", allowed_key + "=" + list + " cubic"});
    if (r.exit_code != 0) {
      why = "cubic is not in " + allowed_key + " (" + list + ") and cannot be added: " + r.output;
      return false;
    }
  }
  for (const auto& h : hosts_) {
    auto r = run_tool({ip_, "netns", "exec", h.name_space, sysctl, "-qw",
                       "net.ipv4.tcp_congestion_control=cubic"});
    if (r.exit_code != 0) {
      why = "cannot set net.ipv4.tcp_congestion_control=cubic in " + h.name_space + ": " +
            r.output;
      return false;
    }
  }
  return true;
}

emulated_hosts::~emulated_hosts() {
  destroy();
}

std::vector<std::string> emulated_hosts::launcher(size_t i) const {
  return {ip_, "netns", "exec", namespace_of(i)};
}

namespace {

/// Runs each command in turn; on the first failure sets `error` and stops.
bool run_all(const std::vector<std::vector<std::string>>& commands, std::string& error) {
  for (const auto& c : commands) {
    auto r = run_tool(c);
    if (r.exit_code != 0) {
      std::string line;
      for (const auto& word : c)
        line += (line.empty() ? "" : " ") + word;
      error = "--link: `" + line + "` failed (exit code " + std::to_string(r.exit_code) +
              "): " + r.output;
      while (!error.empty() && error.back() == '\n')
        error.pop_back();
      return false;
    }
  }
  return true;
}

} // namespace

bool emulated_hosts::add_bridge(int subnet, std::string& error) {
  auto name = bridge_prefix + std::to_string(::getpid());
  if (!run_all({{ip_, "link", "add", name, "type", "bridge"}}, error))
    return false;
  bridge_ = name;
  // Frames between two emulated hosts cross the bridge only: with bridge
  // netfilter on (br_netfilter), a host firewall's FORWARD policy (DROP where
  // Docker runs) would drop them. Best effort: older kernels lack the option.
  run_tool({ip_, "link", "set", bridge_, "type", "bridge", "nf_call_iptables", "0",
            "nf_call_ip6tables", "0", "nf_call_arptables", "0"});
  auto address = subnet_prefix + std::to_string(subnet) + ".1/24";
  return run_all({{ip_, "addr", "add", address, "dev", bridge_},
                  {ip_, "link", "set", bridge_, "up"}},
                 error);
}

bool emulated_hosts::add_host(int32_t index, int subnet, std::string& error) {
  auto pid = std::to_string(::getpid());
  auto number = std::to_string(index + 1);
  host h{namespace_prefix + pid + "-n" + number, veth_prefix + pid + "h" + number,
         veth_prefix + pid + "n" + number,
         subnet_prefix + std::to_string(subnet) + "." + std::to_string(index + 2)};
  if (h.host_interface.size() > max_interface_name || index + 2 > 254) {
    error = "--link: too many local nodes for one emulated subnet (at most 252, and interface "
            "names of at most 15 characters)";
    return false;
  }
  if (!run_all({{ip_, "netns", "add", h.name_space}}, error))
    return false;
  hosts_.push_back(h); // from here destroy() removes it
  return run_all({{ip_, "link", "add", h.host_interface, "type", "veth", "peer", "name",
                   h.node_interface},
                  {ip_, "link", "set", h.node_interface, "netns", h.name_space},
                  {ip_, "link", "set", h.host_interface, "master", bridge_},
                  {ip_, "link", "set", h.host_interface, "up"},
                  {ip_, "-n", h.name_space, "link", "set", "lo", "up"},
                  {ip_, "-n", h.name_space, "addr", "add", h.address + "/24", "dev",
                   h.node_interface},
                  {ip_, "-n", h.name_space, "link", "set", h.node_interface, "up"}},
                 error);
}

bool emulated_hosts::shape(const host& h, const link_spec& link, std::string& error) {
  // Packets wait at most 50 ms in the queue before being dropped.
  std::vector<std::string> tbf{"handle", "1:", "tbf", "rate", rate_text(link.rate_bits),
                               "burst", std::to_string(burst_bytes(link)), "latency", "50ms"};
  auto in_namespace = std::vector<std::string>{ip_, "netns", "exec", h.name_space, tc_};
  auto root = [&](std::vector<std::string> prefix, const std::string& device) {
    prefix.insert(prefix.end(), {"qdisc", "add", "dev", device, "root"});
    prefix.insert(prefix.end(), tbf.begin(), tbf.end());
    return prefix;
  };
  if (!run_all({root({tc_}, h.host_interface), root(in_namespace, h.node_interface)}, error))
    return false;
  if (link.delay.count() == 0 || !netem_)
    return true;
  auto delay = std::to_string(link.delay.count()) + "us";
  auto netem = [&](std::vector<std::string> prefix, const std::string& device) {
    prefix.insert(prefix.end(), {"qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:",
                                 "netem", "delay", delay});
    return prefix;
  };
  std::string ignored;
  if (!run_all({netem({tc_}, h.host_interface)}, ignored)) {
    netem_ = false; // no sch_netem in this kernel: the rate only
    return true;
  }
  return run_all({netem(in_namespace, h.node_interface)}, error);
}

void emulated_hosts::destroy() {
  for (auto h = hosts_.rbegin(); h != hosts_.rend(); ++h) {
    kill_inside(ip_, h->name_space);
    run_tool({ip_, "link", "del", h->host_interface}); // its peer goes with it
    auto r = run_tool({ip_, "netns", "del", h->name_space});
    if (r.exit_code != 0)
      spdlog::warn("--link: cannot remove network namespace {}: {}", h->name_space, r.output);
  }
  hosts_.clear();
  if (!bridge_.empty()) {
    auto r = run_tool({ip_, "link", "del", bridge_});
    if (r.exit_code != 0)
      spdlog::warn("--link: cannot remove bridge {}: {}", bridge_, r.output);
  }
  bridge_.clear();
}

} // namespace runtime
} // namespace baton::actors
