#pragma once

// Where the processes of a `baton launch` meet: rank 0 listens on the
// rendezvous port, every other rank connects, says which rank it is and
// where its node listens, and keeps the connection open for the whole run.
// Rank 0 sends each of them the run's exit code at the end; a connection
// that closes before is a lost process, seen at once on both sides (a host
// that vanishes without closing it: after about 11 s of unanswered TCP
// keepalive probes). The protocol is a line of text each way on a plain TCP connection: it carries
// only ranks, node names and addresses; the nodes themselves are reached
// over CAF, with TLS when the launch has certificates.
//
//   rank R -> rank 0:  baton-launch 1 RANK WORLD NAME HOST PORT   (HOST "-": as rank 0 sees it)
//   rank 0 -> rank R:  exit CODE | error TEXT

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace baton::actors {
inline namespace runtime {

/// True if every address `host` resolves to is a loopback address (127/8,
/// ::1): only processes on this machine can reach a port there (a node
/// without TLS listens only there; a launch whose rank 0 is there runs on
/// this machine alone).
bool loopback_only(const std::string& host);

/// A rank's node as rank 0 learns it at the rendezvous.
struct launch_peer {
  int32_t rank = 0;
  std::string name; ///< its node's name
  std::string host; ///< where its node listens; "" at registration: as rank 0 sees it
  uint16_t port = 0;
};

/// The line a rank registers with.
std::string registration_line(const launch_peer& self, int32_t world_size);

/// Reads a registration line; errc::bad_config saying what is wrong.
caf::expected<launch_peer> parse_registration(const std::string& line, int32_t world_size);

/// Rank 0's side of the rendezvous.
class rendezvous_host {
public:
  /// Listens on `port` (0: chosen by the OS) of 127.0.0.1 (`loopback`) or of
  /// every interface. errc::bad_config "address in use" when another process
  /// has the port.
  static caf::expected<std::unique_ptr<rendezvous_host>> listen(uint16_t port, bool loopback);

  ~rendezvous_host();
  rendezvous_host(const rendezvous_host&) = delete;
  rendezvous_host& operator=(const rendezvous_host&) = delete;

  /// Waits until ranks 1..world-1 have registered, at most `limit` and
  /// while `stop` is false; their nodes in rank order, a host left out
  /// filled with the address the rank connected from. A rank twice, another
  /// world size or a malformed line is refused (the rank is told why) and
  /// fails the gathering, as does a registered rank that leaves.
  caf::expected<std::vector<launch_peer>> gather(int32_t world_size, std::chrono::seconds limit,
                                                 const std::atomic<bool>& stop);

  /// The port it listens on.
  uint16_t port() const;

  /// This host's address as the first registered rank reached it ("" with none).
  const std::string& own_address() const { return own_address_; }

  /// Waits up to `wait` for a registered rank's connection to close: its
  /// rank, or nothing while all stay.
  std::optional<int32_t> lost(std::chrono::milliseconds wait);

  /// Tells every registered rank to exit with `code`.
  void finish(int code);

private:
  explicit rendezvous_host(int listener) : listener_(listener) {}

  int listener_;
  std::vector<int> ranks_; ///< by rank (index 0 unused): the open connections, -1 once closed
  std::string own_address_;
};

/// Another rank's side of the rendezvous.
class rendezvous_guest {
public:
  /// Connects to rank 0 at `host`:`port`, retrying for up to `limit` (rank 0
  /// may start later) while `stop` is false, and registers `self`.
  static caf::expected<std::unique_ptr<rendezvous_guest>>
  join(const std::string& host, uint16_t port, const launch_peer& self, int32_t world_size,
       std::chrono::seconds limit, const std::atomic<bool>& stop);

  ~rendezvous_guest();
  rendezvous_guest(const rendezvous_guest&) = delete;
  rendezvous_guest& operator=(const rendezvous_guest&) = delete;

  /// Waits for rank 0's end: the exit code it sends; errc::bad_config with
  /// the reason when it refused this rank; errc::node_unreachable when its
  /// connection closes without a word (rank 0 died); errc::interrupted when
  /// `stop` becomes true.
  caf::expected<int> wait(const std::atomic<bool>& stop);

private:
  explicit rendezvous_guest(int fd) : fd_(fd) {}

  int fd_;
};

} // namespace runtime
} // namespace baton::actors
