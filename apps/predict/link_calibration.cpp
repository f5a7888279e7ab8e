#include "apps/predict/link_calibration.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "actors/runtime/emulated_hosts.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/cache_dir.hpp"
#include "model/core/fd_io.hpp"

namespace baton::apps {

namespace {

namespace fs = std::filesystem;
using model::read_all;
using model::write_all;
using clock_type = std::chrono::steady_clock;

constexpr int round_trips = 7;          // per size, the median taken
constexpr int warm_up_trips = 2;        // per size, untimed
constexpr int streamed_messages = 2000; // for the per-message overhead
constexpr double streamed_bytes = 64;
constexpr double largest_message = 16.4e6; // 1 kB x 4^7
constexpr double seconds_per_message = 0.15; // the largest message is at most this long
constexpr int child_timeout_ms = 120000;
constexpr int exchange_hosts = 3;          // the all-to-all's
constexpr int exchange_rounds = 6;         // the first one untimed
constexpr double seconds_per_exchange = 0.1; // of the link, per peer and round
constexpr int exchange_pause_ms = 50;      // between rounds: tc's bucket refills

// -- the two processes ---------------------------------------------------------------------
// Forked, they use only system calls on buffers allocated before fork (no
// allocation, no locks: the parent may have threads).

/// What the client asks: `bytes` echoed back (ping-pong), `count`
/// messages of `bytes` answered by one byte (streaming), or the end.
struct request_header {
  uint64_t bytes = 0;
  uint64_t count = 0; ///< 0: echo; > 0: stream; bytes = 0 and count = 0: end
};

/// Enters the network namespace `path` ("" stays).
bool enter_namespace(const char* path) {
  if (path[0] == '\0')
    return true;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// A socket listening on any port of `address` (`port`), or -1.
int listen_on(const char* address, int backlog, uint16_t& port) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &where.sin_addr);
  socklen_t length = sizeof where;
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0 ||
      ::listen(listener, backlog) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&where), &length) != 0)
    return -1;
  port = ntohs(where.sin_port);
  return listener;
}

/// A socket connected to `address`:`port` with TCP_NODELAY, or -1.
int connect_to(const char* address, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &where.sin_addr);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0)
    return -1;
  no_delay(fd);
  return fd;
}

/// The server: listens on any port of `address`, writes the port to
/// `report`, then answers one client until it says end.
[[noreturn]] void serve(const char* ns, const char* address, int report, char* buffer) {
  // A socket belongs to the namespace it is made in: enter it first.
  uint16_t port = 0;
  int listener = enter_namespace(ns) ? listen_on(address, 1, port) : -1;
  if (listener < 0)
    ::_exit(3);
  write_all(report, reinterpret_cast<const char*>(&port), sizeof port);
  int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0)
    ::_exit(4);
  no_delay(fd);
  request_header h;
  while (read_all(fd, reinterpret_cast<char*>(&h), sizeof h) && (h.bytes > 0 || h.count > 0)) {
    if (h.count == 0) {
      if (!read_all(fd, buffer, h.bytes) || !write_all(fd, buffer, h.bytes))
        ::_exit(5);
      continue;
    }
    for (uint64_t k = 0; k < h.count; ++k)
      if (!read_all(fd, buffer, h.bytes))
        ::_exit(5);
    if (!write_all(fd, buffer, 1))
      ::_exit(5);
  }
  ::_exit(0);
}

double since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// One round trip of `bytes` each way.
bool ping_pong(int fd, char* buffer, uint64_t bytes, double& seconds) {
  request_header h{bytes, 0};
  auto start = clock_type::now();
  bool ok = write_all(fd, reinterpret_cast<const char*>(&h), sizeof h) &&
            write_all(fd, buffer, bytes) && read_all(fd, buffer, bytes);
  seconds = since(start);
  return ok;
}

/// The client: for each size, warm-ups then `round_trips` timed round
/// trips (`times`, size by size), then one stream; writes every time (the
/// stream's last) as doubles to `report`.
[[noreturn]] void client(const char* ns, const char* address, uint16_t port, int report,
                         char* buffer, const double* sizes, size_t count, double* times) {
  int fd = enter_namespace(ns) ? connect_to(address, port) : -1;
  if (fd < 0)
    ::_exit(3);
  double* out = times;
  for (size_t s = 0; s < count; ++s)
    for (int k = 0; k < warm_up_trips + round_trips; ++k) {
      double seconds = 0;
      if (!ping_pong(fd, buffer, static_cast<uint64_t>(sizes[s]), seconds))
        ::_exit(5);
      if (k >= warm_up_trips)
        *out++ = seconds;
    }
  request_header h{static_cast<uint64_t>(streamed_bytes), streamed_messages};
  auto start = clock_type::now();
  write_all(fd, reinterpret_cast<const char*>(&h), sizeof h);
  for (int k = 0; k < streamed_messages; ++k)
    write_all(fd, buffer, h.bytes);
  if (!read_all(fd, buffer, 1))
    ::_exit(5);
  *out++ = since(start);
  request_header end{};
  write_all(fd, reinterpret_cast<const char*>(&end), sizeof end);
  write_all(report, reinterpret_cast<const char*>(times),
            static_cast<size_t>(out - times) * sizeof(double));
  ::_exit(0);
}

// -- the all-to-all --------------------------------------------------------------------------

/// Makes `fd` non-blocking.
bool non_blocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

/// Host `self` of the all-to-all: listens on its address, reports the port
/// to `report`, reads every host's port from `control`, connects to each
/// other host (its sends) and accepts each of theirs (its receives). Then
/// per round: waits for a byte on `control`, sends `bytes` to every other
/// host while it receives as many from each, and reports the round's
/// seconds (a double) to `report`.
[[noreturn]] void exchange_host(int self, const char* const* namespaces,
                                const char* const* addresses, int control, int report,
                                char* buffer, size_t buffer_bytes, uint64_t bytes) {
  uint16_t ports[exchange_hosts] = {};
  int listener =
    enter_namespace(namespaces[self]) ? listen_on(addresses[self], exchange_hosts, ports[0]) : -1;
  if (listener < 0)
    ::_exit(3);
  if (!write_all(report, reinterpret_cast<const char*>(ports), sizeof ports[0]) ||
      !read_all(control, reinterpret_cast<char*>(ports), sizeof ports))
    ::_exit(4);
  int out[exchange_hosts - 1], in[exchange_hosts - 1];
  int peers = 0;
  for (int h = 0; h < exchange_hosts; ++h) {
    if (h == self)
      continue;
    if ((out[peers++] = connect_to(addresses[h], ports[h])) < 0)
      ::_exit(4);
  }
  for (int k = 0; k < peers; ++k)
    if ((in[k] = ::accept(listener, nullptr, nullptr)) < 0)
      ::_exit(4);
  for (int k = 0; k < peers; ++k)
    if (!non_blocking(out[k]) || !non_blocking(in[k]))
      ::_exit(4);
  char go = 0;
  while (read_all(control, &go, 1) && go == 'g') {
    uint64_t sent[exchange_hosts - 1] = {}, received[exchange_hosts - 1] = {};
    pollfd watched[2 * (exchange_hosts - 1)];
    auto start = clock_type::now();
    for (;;) {
      int n = 0;
      for (int k = 0; k < peers; ++k) {
        if (sent[k] < bytes)
          watched[n++] = {out[k], POLLOUT, 0};
        if (received[k] < bytes)
          watched[n++] = {in[k], POLLIN, 0};
      }
      if (n == 0)
        break;
      if (::poll(watched, static_cast<nfds_t>(n), child_timeout_ms) <= 0)
        ::_exit(5);
      for (int k = 0; k < peers; ++k) {
        if (sent[k] < bytes) {
          auto done = ::send(out[k], buffer, std::min<uint64_t>(bytes - sent[k], buffer_bytes),
                             MSG_NOSIGNAL);
          if (done > 0)
            sent[k] += static_cast<uint64_t>(done);
          else if (done < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            ::_exit(5);
        }
        if (received[k] < bytes) {
          auto done = ::recv(in[k], buffer, std::min<uint64_t>(bytes - received[k], buffer_bytes),
                             0);
          if (done > 0)
            received[k] += static_cast<uint64_t>(done);
          else if (done == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            ::_exit(5);
        }
      }
    }
    double seconds = since(start);
    if (!write_all(report, reinterpret_cast<const char*>(&seconds), sizeof seconds))
      ::_exit(5);
  }
  ::_exit(0);
}

// -- the parent --------------------------------------------------------------------------

/// Where the two processes run.
struct endpoints {
  std::string server_namespace; ///< /run/netns/NAME, "" for this one
  std::string client_namespace;
  std::string server_address;   ///< what the server binds and the client connects to
};

/// A forked child, stopped and reaped when it goes out of scope.
struct forked_child {
  pid_t pid = -1;
  ~forked_child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

/// A pipe whose open ends close when it goes out of scope (or by close()).
struct owned_pipe {
  int read = -1, write = -1;
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return false;
    read = fds[0];
    write = fds[1];
    return true;
  }
  static void close(int& fd) {
    if (fd >= 0)
      ::close(fd);
    fd = -1;
  }
  ~owned_pipe() {
    close(read);
    close(write);
  }
};

/// Runs the server and the client; the round trips per size and the
/// stream's time (last).
caf::expected<std::vector<double>> measure(const endpoints& e, const std::vector<double>& sizes) {
  std::vector<char> buffer(static_cast<size_t>(largest_message) + 1, 'b');
  std::vector<double> times(sizes.size() * round_trips + 1, 0);
  owned_pipe ports, results;
  if (!ports.open() || !results.open())
    return make_error(errc::bad_file, "link calibration: cannot make a pipe");
  forked_child server, talker;
  server.pid = ::fork();
  if (server.pid == 0)
    serve(e.server_namespace.c_str(), e.server_address.c_str(), ports.write, buffer.data());
  // The parent keeps no write end: a child that dies ends the read at once.
  owned_pipe::close(ports.write);
  uint16_t port = 0;
  bool ok = server.pid > 0 &&
            read_all(ports.read, reinterpret_cast<char*>(&port), sizeof port, child_timeout_ms);
  if (ok) {
    talker.pid = ::fork();
    if (talker.pid == 0)
      client(e.client_namespace.c_str(), e.server_address.c_str(), port, results.write,
             buffer.data(), sizes.data(), sizes.size(), times.data());
    owned_pipe::close(results.write);
    ok = talker.pid > 0 && read_all(results.read, reinterpret_cast<char*>(times.data()),
                                    times.size() * sizeof(double), child_timeout_ms);
  }
  if (!ok)
    return make_error(errc::node_unreachable,
                      "link calibration: the ping-pong processes did not finish (cannot enter "
                      "the emulated hosts' namespaces, or connect, within " +
                        std::to_string(child_timeout_ms / 1000) + " s)");
  return times;
}

/// The all-to-all's rounds (the first untimed) among hosts in `namespaces`
/// at `addresses`, `bytes` from every host to every other host a round: the
/// slowest host's seconds of each timed round.
caf::expected<std::vector<double>> measure_exchange(const std::vector<std::string>& namespaces,
                                                    const std::vector<std::string>& addresses,
                                                    uint64_t bytes) {
  constexpr size_t buffer_bytes = 1u << 20;
  std::vector<char> buffer(buffer_bytes, 'x');
  const char* ns[exchange_hosts];
  const char* at[exchange_hosts];
  for (int h = 0; h < exchange_hosts; ++h) {
    ns[h] = namespaces[static_cast<size_t>(h)].c_str();
    at[h] = addresses[static_cast<size_t>(h)].c_str();
  }
  forked_child hosts[exchange_hosts];
  owned_pipe control[exchange_hosts], report[exchange_hosts];
  auto failed = [] {
    return make_error(errc::node_unreachable,
                      "link calibration: the all-to-all's processes did not finish (cannot "
                      "enter the emulated hosts' namespaces, or connect, within " +
                        std::to_string(child_timeout_ms / 1000) + " s)");
  };
  for (int h = 0; h < exchange_hosts; ++h)
    if (!control[h].open() || !report[h].open())
      return make_error(errc::bad_file, "link calibration: cannot make a pipe");
  for (int h = 0; h < exchange_hosts; ++h) {
    hosts[h].pid = ::fork();
    if (hosts[h].pid == 0) {
      // Only its own pipes: a host that dies ends the parent's read of it.
      for (int other = 0; other < exchange_hosts; ++other) {
        owned_pipe::close(control[other].write);
        owned_pipe::close(report[other].read);
        if (other != h) {
          owned_pipe::close(control[other].read);
          owned_pipe::close(report[other].write);
        }
      }
      exchange_host(h, ns, at, control[h].read, report[h].write, buffer.data(), buffer_bytes,
                    bytes);
    }
    if (hosts[h].pid < 0)
      return failed();
  }
  // The parent keeps no write end of a report: a child that dies ends its read at once.
  for (auto& p : report)
    owned_pipe::close(p.write);
  uint16_t ports[exchange_hosts] = {};
  for (int h = 0; h < exchange_hosts; ++h)
    if (!read_all(report[h].read, reinterpret_cast<char*>(&ports[h]), sizeof ports[h],
                  child_timeout_ms))
      return failed();
  for (int h = 0; h < exchange_hosts; ++h)
    if (!write_all(control[h].write, reinterpret_cast<const char*>(ports), sizeof ports))
      return failed();
  std::vector<double> slowest;
  for (int round = 0; round < exchange_rounds; ++round) {
    ::usleep(exchange_pause_ms * 1000);
    for (auto& p : control)
      if (!write_all(p.write, "g", 1))
        return failed();
    double worst = 0;
    for (auto& p : report) {
      double seconds = 0;
      if (!read_all(p.read, reinterpret_cast<char*>(&seconds), sizeof seconds, child_timeout_ms))
        return failed();
      worst = std::max(worst, seconds);
    }
    if (round > 0)
      slowest.push_back(worst);
  }
  for (auto& p : control) // the children end at the pipe's end
    owned_pipe::close(p.write);
  for (auto& child : hosts)
    if (::waitpid(child.pid, nullptr, 0) == child.pid)
      child.pid = -1;
  return slowest;
}

/// 1 kB, 10 kB, ..., up to 4 MB or what the link carries in 0.1 s.
std::vector<double> sizes_for(double rate_bytes) {
  const double largest = std::min(largest_message, seconds_per_message * rate_bytes);
  std::vector<double> out;
  for (double n = 1e3; n <= largest; n *= 4)
    out.push_back(n);
  return out;
}

link_calibration from_times(const std::vector<double>& sizes, const std::vector<double>& times) {
  link_calibration c;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<double> trips(times.begin() + static_cast<long>(s * round_trips),
                              times.begin() + static_cast<long>((s + 1) * round_trips));
    c.samples.push_back({sizes[s], median_of(trips) / 2});
  }
  const auto [fixed, bandwidth, burst] = fit_link(c.samples);
  c.link.bandwidth = bandwidth;
  c.link.burst = burst;
  // A streamed message costs its overhead or its bytes' time on the link, whichever is longer.
  const double per_message = times.back() / streamed_messages - streamed_bytes / bandwidth;
  c.link.message_overhead = std::clamp(per_message, 0.0, fixed);
  c.link.latency = fixed - c.link.message_overhead;
  return c;
}

std::string file_name_of(const std::string& link) {
  std::string name = "link-";
  for (char ch : link)
    name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ? ch : '_';
  return name + ".json";
}

caf::expected<link_calibration> read_cache(const std::string& path) {
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("bandwidth", 0.0))
    return make_error(errc::bad_file, path + ": not a link calibration");
  link_calibration c;
  c.link.bandwidth = j.value("bandwidth", 0.0);
  c.link.latency = j.value("latency", 0.0);
  c.link.message_overhead = j.value("message_overhead", 0.0);
  // A file written before the burst was kept: read it from its samples.
  c.link.burst = j.value("burst", -1.0);
  c.link.shared_efficiency = j.value("shared_efficiency", 1.0);
  if (!(c.link.shared_efficiency > 0 && c.link.shared_efficiency <= 1))
    return make_error(errc::bad_file, path + ": shared_efficiency is not in (0, 1]");
  for (const auto& s : j.value("exchange_seconds", nlohmann::json::array()))
    if (s.is_number())
      c.exchange_seconds.push_back(s.get<double>());
  c.measured_on = j.value("measured_on", "");
  // Kept before the all-to-all was measured: measured again.
  if (c.measured_on.rfind("emulated", 0) == 0 && !j.contains("shared_efficiency"))
    return make_error(errc::bad_file, path + ": kept without the all-to-all");
  // Kept before the emulated hosts ran TCP cubic (their links were slower
  // under BBR: actors/runtime/emulated_hosts.cpp): measured again.
  if (c.measured_on.rfind("emulated", 0) == 0 &&
      c.measured_on.find("TCP cubic") == std::string::npos)
    return make_error(errc::bad_file, path + ": kept before the emulated hosts ran TCP cubic");
  c.method = j.value("method", "");
  c.samples = samples_of(j.value("samples", nlohmann::json::array()));
  if (c.link.burst < 0)
    c.link.burst = fit_link(c.samples).burst;
  c.cache_file = path;
  c.cached = true;
  return c;
}

const char* method_text =
  "ping-pong over TCP (TCP_NODELAY) between two forked processes: messages of 1 kB to 16 MB "
  "(at most 0.15 s of the link), median of 7 round trips each, halved; bandwidth from the two "
  "largest (past tc's burst), a = the time of the smallest (1 kB, within the burst); "
  "message_overhead = the time per message of 2000 64-byte messages streamed back to back; "
  "latency = a - message_overhead; burst = the largest's bytes less what its time past a "
  "carried at the bandwidth; an emulated link also: an all-to-all among 3 emulated hosts, each "
  "sending 0.1 s of the rate to each other host at once after a 50 ms pause, 5 timed rounds: "
  "shared_efficiency = (2 x bytes - burst) / bandwidth over the rounds' mean (slowest host)";

caf::expected<link_calibration> measure_emulated(const std::string& text) {
  std::string error;
  auto spec = actors::parse_link_spec(text, error);
  if (!spec)
    return make_error(errc::bad_config, "--link " + text + ": " + error);
  if (::geteuid() != 0)
    return make_error(errc::bad_config,
                      "--link " + text + ": measuring an emulated link needs root (network "
                      "namespaces and tc); run as root, or give --latency SECONDS (and "
                      "--bandwidth) to predict without measuring");
  auto hosts = actors::emulated_hosts::create(exchange_hosts, *spec, error);
  if (!hosts)
    return make_error(errc::bad_config, "--link " + text + ": " + error);
  std::vector<std::string> namespaces, addresses;
  for (int h = 0; h < exchange_hosts; ++h) {
    namespaces.push_back("/run/netns/" + hosts->namespace_of(h));
    addresses.push_back(hosts->address_of(h));
  }
  const double rate = static_cast<double>(spec->rate_bits) / 8;
  const auto sizes = sizes_for(rate);
  auto times = measure(endpoints{namespaces[0], namespaces[1], addresses[0]}, sizes);
  if (!times)
    return times.error();
  link_calibration c = from_times(sizes, *times);
  const auto bytes = static_cast<uint64_t>(seconds_per_exchange * rate);
  auto rounds = measure_exchange(namespaces, addresses, bytes);
  if (!rounds)
    return rounds.error();
  c.link.shared_efficiency = exchange_efficiency(c.link, static_cast<double>(bytes), *rounds);
  c.exchange_seconds = *rounds;
  c.measured_on = "emulated link " + text + " between " + std::to_string(exchange_hosts) +
                  " emulated hosts (" + hosts->shaping() + ")";
  return c;
}

caf::expected<link_calibration> measure_loopback() {
  const auto sizes = sizes_for(std::numeric_limits<double>::infinity());
  auto times = measure(endpoints{"", "", "127.0.0.1"}, sizes);
  if (!times)
    return times.error();
  link_calibration c = from_times(sizes, *times);
  c.measured_on = "loopback (127.0.0.1)";
  return c;
}

} // namespace

double median_of(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

nlohmann::json samples_json(const std::vector<link_sample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : samples)
    out.push_back({{"bytes", s.bytes}, {"seconds", s.seconds}});
  return out;
}

std::vector<link_sample> samples_of(const nlohmann::json& samples) {
  std::vector<link_sample> out;
  for (const auto& s : samples)
    if (s.is_object())
      out.push_back({s.value("bytes", 0.0), s.value("seconds", 0.0)});
  return out;
}

std::string keep_calibration(const std::string& cache_dir, const std::string& name,
                             const nlohmann::json& j) {
  const std::string path = cache_dir + "/" + name;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  return model::try_replace_file(path, j.dump(2) + "\n").empty() ? path : "";
}

nlohmann::json to_json(const link_calibration& c) {
  return {{"bandwidth", c.link.bandwidth},
          {"latency", c.link.latency},
          {"message_overhead", c.link.message_overhead},
          {"burst", c.link.burst},
          {"shared_efficiency", c.link.shared_efficiency},
          {"exchange_seconds", c.exchange_seconds},
          {"measured_on", c.measured_on},
          {"method", c.method},
          {"samples", samples_json(c.samples)}};
}

std::string default_link_cache_dir() {
  const std::string dir = model::user_cache_dir();
  return dir.empty() ? (fs::temp_directory_path() / "baton").string() : dir;
}

double exchange_efficiency(const model::cost::link_model& link, double bytes,
                           const std::vector<double>& rounds) {
  if (rounds.empty() || !std::isfinite(link.bandwidth))
    return 1;
  double sum = 0;
  for (double seconds : rounds)
    sum += seconds;
  const double mean = sum / static_cast<double>(rounds.size());
  // Each host sends (and receives) `bytes` to (from) each of the others,
  // the first `burst` of them at once after the pause.
  const double sent = (exchange_hosts - 1) * bytes;
  const double at_rate = std::max(0.0, sent - link.burst) / link.bandwidth;
  return mean > 0 ? std::clamp(at_rate / mean, 0.05, 1.0) : 1.0;
}

link_fit fit_link(const std::vector<link_sample>& given) {
  // The bandwidth from the two largest messages: tc's tbf lets a burst (10 ms of the
  // rate) pass at the veth's speed, so small messages say nothing of the rate, and a
  // fit over every size is pulled to it. The fixed part from the small ones.
  std::vector<link_sample> samples = given;
  std::sort(samples.begin(), samples.end(),
            [](const link_sample& a, const link_sample& b) { return a.bytes < b.bytes; });
  constexpr double unlimited = std::numeric_limits<double>::infinity();
  if (samples.empty())
    return {0, unlimited, 0};
  link_fit fit{samples.front().seconds, unlimited, 0};
  if (samples.size() >= 2) {
    const auto& big = samples.back();
    const auto& next = samples[samples.size() - 2];
    if (big.seconds > next.seconds) {
      fit.bandwidth = (big.bytes - next.bytes) / (big.seconds - next.seconds);
      // The largest took (bytes - burst) / bandwidth after the fixed part.
      fit.burst = std::max(0.0, big.bytes - (big.seconds - fit.fixed) * fit.bandwidth);
    }
  }
  return fit;
}

caf::expected<link_calibration> calibrate_link(const std::string& link,
                                               const std::string& cache_dir) {
  const bool loopback = link.empty() || link == "loopback";
  const std::string path =
    cache_dir.empty() ? "" : cache_dir + "/" + file_name_of(loopback ? "loopback" : link);
  if (!path.empty() && fs::exists(path))
    if (auto cached = read_cache(path))
      return cached;
  auto c = loopback ? measure_loopback() : measure_emulated(link);
  if (!c)
    return c.error();
  c->method = method_text;
  if (!path.empty())
    c->cache_file = keep_calibration(cache_dir, file_name_of(loopback ? "loopback" : link),
                                     to_json(*c));
  return c;
}

} // namespace baton::apps
