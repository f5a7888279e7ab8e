#pragma once

// Emulated hosts for `baton run --local-nodes N --link RATE[,DELAY]`: each
// local node gets its own network namespace, joined to this process's
// namespace through a veth pair and a bridge, each link shaped with `tc`.
// CAF-free: errors are text, turned into error values by local_cluster.
//
//   coordinator's namespace          namespace baton-PID-n1
//   bridge btnbrPID 10.214.K.1  ---  veth btnvPIDh1 | btnvPIDn1 10.214.K.2
//                               ---  veth btnvPIDh2 | btnvPIDn2 10.214.K.3 (baton-PID-n2)
//
// Every veth end has a tbf qdisc of the link's rate (egress), so each
// direction of each node's link carries at most RATE; with a DELAY and a
// kernel with sch_netem, a netem delay under the tbf as well.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton::actors {
inline namespace runtime {

/// A link as `--link RATE[,DELAY]` describes it.
struct link_spec {
  uint64_t rate_bits = 0;             ///< bits per second, > 0
  std::chrono::microseconds delay{0}; ///< added each way on each link; 0: none
  std::string text;                   ///< as given, for messages
};

/// The expected form of a link spec, for error messages.
inline constexpr const char* link_spec_form =
  "RATE[,DELAY] with RATE a positive number and bit, kbit, mbit or gbit (decimal: 1mbit = "
  "1,000,000 bit/s) and DELAY a number and us, ms or s (for example 1gbit,1ms or 100mbit)";

/// Parses "RATE[,DELAY]" ("1gbit,1ms", "100mbit", "2.5mbit,500us"; units
/// case-insensitive). On bad text returns nothing and sets `error` to what
/// was wrong and the expected form.
std::optional<link_spec> parse_link_spec(const std::string& text, std::string& error);

/// The bytes/s of a `--link` RATE[,DELAY] (0 for "" or text that does not
/// parse): what the planners take as the link's bandwidth.
double link_bytes_per_second(const std::string& text);

/// The burst of the token bucket (tc's tbf) that shapes an emulated link:
/// 10 ms at the rate, at least 64 KiB (a segmentation-offloaded packet).
uint64_t burst_bytes(const link_spec& link);

/// How a command run by run_tool ended.
struct tool_result {
  int exit_code = -1; ///< 128 + signal if killed; -1 if it could not start
  std::string output; ///< stdout and stderr together
};

/// The path of the system tool `name` ("ip", "tc") in /usr/sbin, /sbin,
/// /usr/bin or /bin (root's PATH is not always set); empty if none.
std::string find_tool(const std::string& name);

/// Runs `argv` (argv[0] a path) without a shell, stdin from /dev/null, and
/// waits for it.
tool_result run_tool(const std::vector<std::string>& argv);

/// Removes the namespaces (and their processes) and interfaces an earlier
/// baton left when it died without cleaning up: those named with the baton
/// prefix and the process id of a process that no longer exists. Returns
/// their names.
std::vector<std::string> remove_stale_emulated_hosts();

/// The namespaces, veth pairs, bridge and qdiscs of one run's emulated
/// hosts, named after this process's id; all removed (with any process still
/// inside a namespace) by the destructor or destroy().
class emulated_hosts {
public:
  /// Builds `count` emulated hosts whose links are shaped as `link`; on a
  /// failure sets `error` (naming the command and its output), removes what
  /// was made and returns null. Needs root (CAP_NET_ADMIN).
  static std::unique_ptr<emulated_hosts> create(int32_t count, const link_spec& link,
                                                std::string& error);

  emulated_hosts(const emulated_hosts&) = delete;
  emulated_hosts& operator=(const emulated_hosts&) = delete;
  ~emulated_hosts();

  /// The number of hosts.
  size_t size() const { return hosts_.size(); }
  /// The network namespace of host `i` (0-based), e.g. "baton-4711-n1".
  const std::string& namespace_of(size_t i) const { return hosts_.at(i).name_space; }
  /// The IPv4 address of host `i` inside its namespace.
  const std::string& address_of(size_t i) const { return hosts_.at(i).address; }
  /// The command prefix that runs a program inside host `i`'s namespace
  /// (`ip netns exec NAME`); the program's argv follows.
  std::vector<std::string> launcher(size_t i) const;
  /// How the links are shaped, for the log line ("tc tbf rate ... and netem
  /// delay ...", or why there is no delay, and TCP's congestion control).
  const std::string& shaping() const { return shaping_; }

  /// Stops whatever still runs inside the namespaces (SIGKILL) and removes
  /// the namespaces, the veth pairs and the bridge. Idempotent.
  void destroy();

private:
  struct host {
    std::string name_space;     ///< baton-PID-nI
    std::string host_interface; ///< veth end on the bridge (this namespace)
    std::string node_interface; ///< veth end inside the namespace
    std::string address;        ///< the node's address
  };

  emulated_hosts() = default;
  bool add_bridge(int subnet, std::string& error);
  bool add_host(int32_t index, int subnet, std::string& error);
  bool shape(const host& h, const link_spec& link, std::string& error);
  /// Sets TCP's congestion control in every host to cubic; false (and why,
  /// in `why`) where it cannot: the hosts then keep this machine's default.
  bool use_cubic(std::string& why) const;

  std::string ip_;
  std::string tc_;
  std::string bridge_;
  std::vector<host> hosts_;
  std::string shaping_;
  bool netem_ = true; ///< false once netem failed: not tried again
};

} // namespace runtime
} // namespace baton::actors
