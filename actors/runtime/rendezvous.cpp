#include "actors/runtime/rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "actors/config/names.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// The longest line either side sends (names and hosts are short).
constexpr size_t max_line = 1024;

/// How often a waiting side looks at its stop flag.
constexpr auto poll_interval = std::chrono::milliseconds(100);

using clock_type = std::chrono::steady_clock;

void send_line(int fd, const std::string& line) {
  std::string text = line + "\n";
  // A rank that is gone cannot be told; its connection closing is its news.
  auto sent = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  (void)sent;
}

/// Reads what `fd` has into `buffer`; false when the peer closed the
/// connection (or it failed) or sent a line too long.
bool read_some(int fd, std::string& buffer) {
  char chunk[256];
  auto n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n <= 0)
    return false;
  buffer.append(chunk, static_cast<size_t>(n));
  return buffer.size() <= max_line || buffer.find('\n') != std::string::npos;
}

/// The first line of `buffer` once it is complete.
std::optional<std::string> complete_line(const std::string& buffer) {
  auto end = buffer.find('\n');
  if (end == std::string::npos)
    return std::nullopt;
  return buffer.substr(0, end);
}

std::string address_of(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  else
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  return text;
}

/// The address of the peer of `fd` (`peer`) or of its own end.
std::string end_of(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t size = sizeof a;
  int ok = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &size)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  return ok == 0 ? address_of(a) : std::string{};
}

/// Turns on TCP keepalive probes on a rendezvous connection: 5 s idle, then
/// a probe every 2 s, closed after 3 unanswered. A process that dies is
/// seen at once (its kernel closes the connection), but a host that
/// vanishes (power, network) closes nothing: without probes the other side
/// would wait for the run's whole length.
void keep_alive(int fd) {
  int on = 1, idle = 5, interval = 2, count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

/// A connection to `host`:`port`, or -1 (errno set).
int connect_to(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0)
    return -1;
  int fd = -1;
  for (auto a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

/// Waits up to `wait` for input on `fds`; the indexes that have some (or
/// were closed).
std::vector<size_t> readable(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  std::vector<pollfd> polled;
  for (int fd : fds)
    polled.push_back({fd, POLLIN, 0});
  std::vector<size_t> out;
  if (::poll(polled.data(), polled.size(), static_cast<int>(wait.count())) <= 0)
    return out;
  for (size_t i = 0; i < polled.size(); ++i)
    if (polled[i].revents != 0)
      out.push_back(i);
  return out;
}

/// A connection that has not registered yet.
struct pending {
  int fd;
  std::string buffer;
};

} // namespace

bool loopback_only(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0)
    return false;
  bool loopback = true;
  for (auto a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      loopback = loopback && (ip >> 24) == 127;
    } else {
      auto& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      loopback = loopback && a->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&ip);
    }
  }
  ::freeaddrinfo(found);
  return loopback;
}

// -- the registration line ----------------------------------------------------

std::string registration_line(const launch_peer& self, int32_t world_size) {
  return "baton-launch 1 " + std::to_string(self.rank) + " " + std::to_string(world_size) + " " +
         self.name + " " + (self.host.empty() ? "-" : self.host) + " " +
         std::to_string(self.port);
}

caf::expected<launch_peer> parse_registration(const std::string& line, int32_t world_size) {
  std::istringstream in{line};
  std::string magic, version, host;
  int64_t world = 0, rank = -1, port = -1;
  launch_peer p;
  in >> magic >> version >> rank >> world >> p.name >> host >> port;
  std::string rest;
  if (!in || (in >> rest) || magic != "baton-launch" || version != "1")
    return make_error(errc::bad_config, "not a baton launch registration: '" +
                                          line.substr(0, 80) + "'");
  if (world != world_size)
    return make_error(errc::bad_config, "rank " + std::to_string(rank) + " was started with a "
                                          "world size of " + std::to_string(world) + ", rank 0 "
                                          "with " + std::to_string(world_size));
  if (rank < 1 || rank >= world_size || port < 1 || port > 65535)
    return make_error(errc::bad_config, "registration with rank " + std::to_string(rank) +
                                          " and port " + std::to_string(port) + " out of range");
  if (auto why = check_name(p.name); !why.empty())
    return make_error(errc::bad_config, "rank " + std::to_string(rank) + "'s node name '" +
                                          p.name + "': " + why);
  p.rank = static_cast<int32_t>(rank);
  p.host = host == "-" ? "" : host;
  p.port = static_cast<uint16_t>(port);
  return p;
}

// -- rank 0 ---------------------------------------------------------------------

caf::expected<std::unique_ptr<rendezvous_host>> rendezvous_host::listen(uint16_t port,
                                                                        bool loopback) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  // A restarted rank 0 takes the port back from its predecessor's TIME_WAIT.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 64) != 0) {
    std::string why = errno == EADDRINUSE ? "address in use (another process listens there: "
                                            "choose another with --rendezvous-port)"
                                          : std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return make_error(errc::bad_config, "cannot listen for the other ranks on port " +
                                          std::to_string(port) + ": " + why);
  }
  return std::unique_ptr<rendezvous_host>{new rendezvous_host{fd}};
}

uint16_t rendezvous_host::port() const {
  sockaddr_in a{};
  socklen_t size = sizeof a;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &size);
  return ntohs(a.sin_port);
}

rendezvous_host::~rendezvous_host() {
  for (int fd : ranks_)
    if (fd >= 0)
      ::close(fd);
  ::close(listener_);
}

caf::expected<std::vector<launch_peer>>
rendezvous_host::gather(int32_t world_size, std::chrono::seconds limit,
                        const std::atomic<bool>& stop) {
  ranks_.assign(static_cast<size_t>(world_size), -1);
  std::vector<launch_peer> peers(static_cast<size_t>(world_size));
  std::vector<pending> waiting;
  int32_t missing = world_size - 1;
  auto deadline = clock_type::now() + limit;
  while (missing > 0) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while waiting for the other ranks");
    if (clock_type::now() > deadline)
      return make_error(errc::node_unreachable,
                        std::to_string(missing) + " of " + std::to_string(world_size - 1) +
                          " ranks did not register within " + std::to_string(limit.count()) +
                          " s: are they started, with the same rank 0 address and port?");
    std::vector<int> fds{listener_};
    for (const auto& p : waiting)
      fds.push_back(p.fd);
    for (int fd : ranks_)
      fds.push_back(fd >= 0 ? fd : -1);
    for (size_t i : readable(fds, poll_interval)) {
      if (i == 0) {
        int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          keep_alive(fd);
          waiting.push_back({fd, {}});
        }
      } else if (i > waiting.size()) {
        // A registered rank has nothing more to say before the end.
        auto rank = static_cast<int32_t>(i - waiting.size() - 1);
        return make_error(errc::node_unreachable, "rank " + std::to_string(rank) + " left "
                                                  "before every rank had registered");
      }
    }
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto ready = readable({it->fd}, std::chrono::milliseconds(0));
      bool open = ready.empty() || read_some(it->fd, it->buffer);
      auto line = complete_line(it->buffer);
      if (!open && !line) {
        ::close(it->fd);
        it = waiting.erase(it);
        continue;
      }
      if (!line) {
        ++it;
        continue;
      }
      auto peer = parse_registration(*line, world_size);
      if (peer && ranks_[static_cast<size_t>(peer->rank)] >= 0)
        peer = make_error(errc::bad_config, "two processes registered as rank " +
                                              std::to_string(peer->rank));
      if (!peer) {
        send_line(it->fd, "error " + context_of(peer.error()));
        ::close(it->fd);
        return peer.error();
      }
      if (peer->host.empty())
        peer->host = end_of(it->fd, true);
      if (own_address_.empty())
        own_address_ = end_of(it->fd, false);
      ranks_[static_cast<size_t>(peer->rank)] = it->fd;
      peers[static_cast<size_t>(peer->rank)] = *peer;
      --missing;
      it = waiting.erase(it);
    }
  }
  for (const auto& p : waiting)
    ::close(p.fd);
  peers.erase(peers.begin());
  return peers;
}

std::optional<int32_t> rendezvous_host::lost(std::chrono::milliseconds wait) {
  std::vector<int> fds;
  for (int fd : ranks_)
    fds.push_back(fd);
  for (size_t i : readable(fds, wait)) {
    std::string ignored;
    if (!read_some(fds[i], ignored)) {
      ::close(fds[i]);
      ranks_[i] = -1;
      return static_cast<int32_t>(i);
    }
  }
  return std::nullopt;
}

void rendezvous_host::finish(int code) {
  for (int fd : ranks_)
    if (fd >= 0)
      send_line(fd, "exit " + std::to_string(code));
}

// -- the other ranks ----------------------------------------------------------

caf::expected<std::unique_ptr<rendezvous_guest>>
rendezvous_guest::join(const std::string& host, uint16_t port, const launch_peer& self,
                       int32_t world_size, std::chrono::seconds limit,
                       const std::atomic<bool>& stop) {
  auto deadline = clock_type::now() + limit;
  int fd = connect_to(host, port);
  while (fd < 0) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while waiting for rank 0");
    if (clock_type::now() > deadline)
      return make_error(errc::node_unreachable,
                        "rank 0 at " + host + ":" + std::to_string(port) + " did not answer "
                        "within " + std::to_string(limit.count()) + " s: is it started, and "
                        "is the port open between the hosts?");
    std::this_thread::sleep_for(poll_interval);
    fd = connect_to(host, port);
  }
  keep_alive(fd);
  send_line(fd, registration_line(self, world_size));
  return std::unique_ptr<rendezvous_guest>{new rendezvous_guest{fd}};
}

rendezvous_guest::~rendezvous_guest() {
  ::close(fd_);
}

caf::expected<int> rendezvous_guest::wait(const std::atomic<bool>& stop) {
  std::string buffer;
  for (;;) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while rank 0 ran the job");
    if (readable({fd_}, poll_interval).empty())
      continue;
    bool open = read_some(fd_, buffer);
    if (auto line = complete_line(buffer)) {
      std::istringstream in{*line};
      std::string word;
      int code = 0;
      in >> word;
      if (word == "exit" && (in >> code))
        return code;
      return make_error(errc::bad_config, "rank 0 refused this rank: " +
                                            (line->size() > 6 ? line->substr(6) : *line));
    }
    if (!open)
      return make_error(errc::node_unreachable, "lost rank 0: its connection closed before "
                                                "the job ended (its process died or was killed)");
  }
}

} // namespace runtime
} // namespace baton::actors
