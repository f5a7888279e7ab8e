#include "actors/runtime/rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/config/names.hpp"
#include "actors/net/signed_text.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

/// The longest line either side sends: names and hosts are short, a proof
/// carries a certificate (about 1 KiB as PEM) and a signature in base64.
constexpr size_t max_line = 8192;

/// The most connections that may wait to register at once; more are closed
/// as they come (a flood must not cost rank 0 its descriptors).
constexpr size_t max_pending = 256;

/// The first word of rank 0's challenge line.
const std::string challenge_word = "baton-launch-challenge";

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

/// `text` as one printable line of at most `most` characters, for the log:
/// what a stranger sent may hold anything.
std::string printable(const std::string& text, size_t most = 80) {
  std::string out;
  for (char c : text.substr(0, most))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return text.size() > most ? out + "..." : out;
}

/// Reads from `fd` until a complete line is in `buffer` or `deadline`
/// passes or `stop`; the line, or nothing (closed, too long, timed out).
std::optional<std::string> read_line(int fd, std::string& buffer, clock_type::time_point deadline,
                                     const std::atomic<bool>& stop) {
  while (!stop.load() && clock_type::now() < deadline) {
    if (auto line = complete_line(buffer)) {
      buffer.erase(0, line->size() + 1);
      return line;
    }
    if (readable({fd}, poll_interval).empty())
      continue;
    if (!read_some(fd, buffer)) {
      auto line = complete_line(buffer);
      buffer.clear();
      return line;
    }
  }
  return std::nullopt;
}

} // namespace

/// A connection that has not registered yet.
struct rendezvous_host::pending {
  int fd;
  std::string buffer;
  std::string challenge;         ///< what its proof must sign
  std::string address;           ///< where it comes from, for the log
  clock_type::time_point since;  ///< when it connected
};

host_answer look_up(const std::string& host) {
  host_answer answer;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (host.empty())
    return answer;
  if (int code = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); code != 0) {
    if (code == EAI_NONAME || code == EAI_FAIL)
      answer.unknown = ::gai_strerror(code);
    return answer;
  }
  answer.loopback = true;
  for (auto a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      answer.loopback = answer.loopback && (ip >> 24) == 127;
    } else {
      auto& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      answer.loopback = answer.loopback && a->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&ip);
    }
  }
  ::freeaddrinfo(found);
  return answer;
}

bool loopback_only(const std::string& host) {
  return look_up(host).loopback;
}

// -- the registration line ----------------------------------------------------

std::string registration_text(const launch_peer& self, int32_t world_size,
                              const std::string& job_id) {
  return "baton-launch 2 " + (job_id.empty() ? std::string{"-"} : job_id) + " " +
         std::to_string(self.rank) + " " + std::to_string(world_size) + " " + self.name + " " +
         (self.host.empty() ? "-" : self.host) + " " + std::to_string(self.port);
}

std::string registration_line(const launch_peer& self, int32_t world_size,
                              const std::string& job_id, const std::string& proof) {
  return registration_text(self, world_size, job_id) + " " + (proof.empty() ? "-" : proof);
}

std::string signed_registration(const std::string& text, const std::string& challenge) {
  return text + " " + challenge;
}

std::optional<registration> parse_registration(const std::string& line) {
  std::istringstream in{line};
  std::string magic, version, job, host, proof, rest;
  int64_t world = 0, rank = -1, port = -1;
  registration r;
  in >> magic >> version >> job >> rank >> world >> r.peer.name >> host >> port >> proof;
  if (!in || (in >> rest) || magic != "baton-launch" || version != "2")
    return std::nullopt;
  auto clamp = [](int64_t v) {
    return static_cast<int32_t>(std::max<int64_t>(-1, std::min<int64_t>(v, INT32_MAX)));
  };
  r.peer.rank = clamp(rank);
  r.world_size = clamp(world);
  r.peer.host = host == "-" ? "" : host;
  r.peer.port = port >= 1 && port <= 65535 ? static_cast<uint16_t>(port) : 0;
  r.job_id = job == "-" ? "" : job;
  r.proof = proof == "-" ? "" : proof;
  r.text = line.substr(0, line.rfind(' '));
  return r;
}

caf::error check_registration(const registration& r, int32_t world_size) {
  const auto rank = std::to_string(r.peer.rank);
  if (r.world_size != world_size)
    return make_error(errc::bad_config, "rank " + rank + " was started with a world size of " +
                                          std::to_string(r.world_size) + ", rank 0 with " +
                                          std::to_string(world_size));
  if (r.peer.rank < 1 || r.peer.rank >= world_size || r.peer.port == 0)
    return make_error(errc::bad_config, "registration with rank " + rank + " and a port out of "
                                          "range or a rank out of 1.." +
                                          std::to_string(world_size - 1));
  if (auto why = check_name(r.peer.name); !why.empty())
    return make_error(errc::bad_config, "rank " + rank + "'s node name '" + r.peer.name + "': " +
                                          why);
  return caf::none;
}

// -- rank 0 ---------------------------------------------------------------------

caf::expected<std::unique_ptr<rendezvous_host>>
rendezvous_host::listen(uint16_t port, bool loopback, const rendezvous_rules& rules) {
  x509_ptr ca;
  if (rules.authenticated()) {
    auto read = read_certificate(rules.ca);
    if (!read)
      return read.error();
    ca = std::move(*read);
  }
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
  return std::unique_ptr<rendezvous_host>{new rendezvous_host{fd, rules, std::move(ca)}};
}

rendezvous_host::rendezvous_host(int listener, rendezvous_rules rules, x509_ptr ca)
    : listener_(listener), rules_(std::move(rules)), ca_(std::move(ca)) {}

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
  for (const auto& p : waiting_)
    ::close(p.fd);
  ::close(listener_);
}

bool rendezvous_host::take_line(pending& p, int32_t world_size, std::vector<launch_peer>& peers,
                                int32_t& missing, caf::error& fatal) {
  bool open = read_some(p.fd, p.buffer);
  auto line = complete_line(p.buffer);
  if (!line) {
    if (!open && p.buffer.size() > max_line)
      spdlog::warn("baton launch: ignored a connection from {}: {} bytes without a line end "
                   "(not a baton launch rank)", p.address, p.buffer.size());
    return !open;
  }
  auto refuse = [&](const std::string& why) {
    spdlog::warn("baton launch: refused a registration from {}: {}", p.address, why);
    send_line(p.fd, "error " + why);
    return true;
  };
  auto r = parse_registration(*line);
  if (!r) {
    spdlog::warn("baton launch: ignored a connection from {}: not a baton launch registration: "
                 "'{}'", p.address, printable(*line));
    return true;
  }
  const auto rank = "rank " + std::to_string(r->peer.rank);
  if (r->job_id != rules_.job_id)
    return refuse(rank + " of job " + (r->job_id.empty() ? "(none)" : r->job_id) + ", but this "
                  "rank 0 runs job " + (rules_.job_id.empty() ? "(none)" : rules_.job_id) +
                  ": another job with the same rendezvous port? (give each job its own "
                  "--job-id or MASTER_PORT)");
  if (ca_) {
    auto why = check_signed_text(r->proof, signed_registration(r->text, p.challenge),
                                 r->peer.name, ca_.get());
    if (!why.empty())
      return refuse(rank + " (node '" + printable(r->peer.name, 64) + "') did not prove its "
                    "identity: " + why);
  }
  if (auto err = check_registration(*r, world_size)) {
    send_line(p.fd, "error " + context_of(err));
    fatal = err;
    return true;
  }
  auto& slot = ranks_[static_cast<size_t>(r->peer.rank)];
  if (slot >= 0)
    return refuse(rank + " is already registered (node '" +
                  peers[static_cast<size_t>(r->peer.rank)].name + "' from " +
                  end_of(slot, true) + "): a second registration as " + rank + " from " +
                  p.address + " is refused" +
                  (ca_ ? "" : " (without --tls-dir the rendezvous trusts the network: the "
                              "first registration of a rank holds)"));
  if (r->peer.host.empty())
    r->peer.host = end_of(p.fd, true);
  if (own_address_.empty())
    own_address_ = end_of(p.fd, false);
  slot = p.fd;
  p.fd = -1; // now the rank's
  peers[static_cast<size_t>(r->peer.rank)] = r->peer;
  --missing;
  return true;
}

caf::expected<std::vector<launch_peer>>
rendezvous_host::gather(int32_t world_size, std::chrono::seconds limit,
                        const std::atomic<bool>& stop) {
  ranks_.assign(static_cast<size_t>(world_size), -1);
  std::vector<launch_peer> peers(static_cast<size_t>(world_size));
  int32_t missing = world_size - 1;
  auto deadline = clock_type::now() + limit;
  bool flood_logged = false;
  while (missing > 0) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while waiting for the other ranks");
    if (clock_type::now() > deadline)
      return make_error(errc::node_unreachable,
                        std::to_string(missing) + " of " + std::to_string(world_size - 1) +
                          " ranks did not register within " + std::to_string(limit.count()) +
                          " s: are they started, with the same rank 0 address and port" +
                          (rules_.job_id.empty() ? "" : " and job id " + rules_.job_id) + "?");
    std::vector<int> fds{listener_};
    for (const auto& p : waiting_)
      fds.push_back(p.fd);
    for (int fd : ranks_)
      fds.push_back(fd);
    std::vector<size_t> done;
    for (size_t i : readable(fds, poll_interval)) {
      if (i == 0) {
        int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0)
          continue;
        if (waiting_.size() >= max_pending) {
          if (!std::exchange(flood_logged, true))
            spdlog::warn("baton launch: {} connections wait to register: closing new ones "
                         "until they do (first: {})", max_pending, end_of(fd, true));
          ::close(fd);
          continue;
        }
        keep_alive(fd);
        pending p{fd, {}, random_challenge(), end_of(fd, true), clock_type::now()};
        send_line(fd, challenge_word + " " + p.challenge);
        waiting_.push_back(std::move(p));
      } else if (i <= waiting_.size()) {
        caf::error fatal;
        if (take_line(waiting_[i - 1], world_size, peers, missing, fatal))
          done.push_back(i - 1);
        if (fatal)
          return fatal;
      } else {
        // A registered rank has nothing more to say before the end: its
        // connection closed.
        auto rank = i - waiting_.size() - 1;
        std::string ignored;
        if (read_some(ranks_[rank], ignored))
          continue;
        ::close(ranks_[rank]);
        ranks_[rank] = -1;
        return make_error(errc::node_unreachable, "rank " + std::to_string(rank) + " left "
                                                  "before every rank had registered");
      }
    }
    // Connections done with, and those that said nothing in time, go.
    auto now = clock_type::now();
    for (size_t k = 0; k < waiting_.size(); ++k)
      if (std::find(done.begin(), done.end(), k) == done.end() &&
          now - waiting_[k].since > registration_grace) {
        spdlog::warn("baton launch: closed a connection from {} that sent no registration "
                     "within {} s", waiting_[k].address, registration_grace.count());
        done.push_back(k);
      }
    std::sort(done.rbegin(), done.rend());
    for (size_t k : done) {
      if (waiting_[k].fd >= 0)
        ::close(waiting_[k].fd);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (waiting_.size() < max_pending)
      flood_logged = false;
  }
  for (const auto& p : waiting_)
    ::close(p.fd);
  waiting_.clear();
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

void rendezvous_host::finish(int code, const std::string& reason) {
  std::string line = "exit " + std::to_string(code);
  if (!reason.empty())
    line += " " + printable(reason, max_line / 2);
  for (int fd : ranks_)
    if (fd >= 0)
      send_line(fd, line);
}

// -- the other ranks ----------------------------------------------------------

caf::expected<std::unique_ptr<rendezvous_guest>>
rendezvous_guest::join(const std::string& host, uint16_t port, const launch_peer& self,
                       int32_t world_size, std::chrono::seconds limit,
                       const std::atomic<bool>& stop, const rendezvous_rules& rules) {
  auto deadline = clock_type::now() + limit;
  const auto where = host + ":" + std::to_string(port);
  for (;;) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while waiting for rank 0");
    if (clock_type::now() > deadline)
      return make_error(errc::node_unreachable,
                        "rank 0 at " + where + " did not answer within " +
                          std::to_string(limit.count()) + " s: is it started, and is the port "
                          "open between the hosts?");
    int fd = connect_to(host, port);
    if (fd < 0) {
      std::this_thread::sleep_for(poll_interval);
      continue;
    }
    keep_alive(fd);
    std::unique_ptr<rendezvous_guest> guest{new rendezvous_guest{fd}};
    // Rank 0 speaks first: its challenge, which the proof signs.
    std::string buffer;
    auto line = read_line(fd, buffer, std::min(deadline, clock_type::now() + registration_grace),
                          stop);
    if (!line) {
      std::this_thread::sleep_for(poll_interval);
      continue; // closed (rank 0 restarting, or busy) or silent: again
    }
    std::istringstream in{*line};
    std::string word, challenge;
    in >> word >> challenge;
    if (word != challenge_word || challenge.empty())
      return make_error(errc::bad_config, "what listens at " + where + " is not the rendezvous "
                                          "of a baton launch (it said '" + printable(*line) +
                                          "'): is --rendezvous-port (or MASTER_PORT + 1) right?");
    std::string proof;
    const auto text = registration_text(self, world_size, rules.job_id);
    if (rules.authenticated()) {
      auto signed_text = sign_text(signed_registration(text, challenge), rules.certificate,
                                   rules.key);
      if (!signed_text)
        return signed_text.error();
      proof = *signed_text;
    }
    send_line(fd, registration_line(self, world_size, rules.job_id, proof));
    guest->buffer_ = buffer;
    return guest;
  }
}

rendezvous_guest::~rendezvous_guest() {
  ::close(fd_);
}

caf::expected<launch_end> rendezvous_guest::wait(const std::atomic<bool>& stop) {
  std::string& buffer = buffer_;
  for (;;) {
    if (stop.load())
      return make_error(errc::interrupted, "stopped while rank 0 ran the job");
    bool open = true;
    if (!complete_line(buffer)) {
      if (readable({fd_}, poll_interval).empty())
        continue;
      open = read_some(fd_, buffer);
    }
    if (auto line = complete_line(buffer)) {
      std::istringstream in{*line};
      std::string word;
      launch_end end;
      in >> word;
      if (word == "exit" && (in >> end.code)) {
        std::getline(in >> std::ws, end.reason);
        return end;
      }
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
