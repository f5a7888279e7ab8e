#pragma once

// Where the processes of a `baton launch` meet: rank 0 listens on the
// rendezvous port, every other rank connects, says which rank of which job it
// is and where its node listens, and keeps the connection open for the whole
// run. Rank 0 sends each of them the run's exit code at the end (with the
// reason when it gave up before the job ran); a connection that closes before
// is a lost process, seen at once on both sides (a host that vanishes without
// closing it: after about 11 s of unanswered TCP keepalive probes). The
// protocol is a line of text each way on a plain TCP connection: it carries
// only ranks, node names, addresses and, with --tls-dir, a proof of identity;
// the nodes themselves are reached over CAF, with TLS when the launch has
// certificates.
//
//   rank 0 -> rank R:  baton-launch-challenge NONCE          (on connecting)
//   rank R -> rank 0:  baton-launch 2 JOB RANK WORLD NAME HOST PORT PROOF
//                      (JOB "-": none; HOST "-": as rank 0 sees it; PROOF "-"
//                      without TLS, else sign_text's token over the line
//                      before PROOF, a space and NONCE: signed_text.hpp)
//   rank 0 -> rank R:  exit CODE [REASON] | error TEXT
//
// What rank 0 cannot read (another program's bytes, a line too long, a
// connection that says nothing for registration_grace) is logged and
// closed, and rank 0 keeps listening. A rank of another job, one whose proof
// does not hold (with TLS) and a second registration of a registered rank
// are refused (told why, logged); without TLS the rendezvous trusts the
// network, and the job id is what keeps two jobs on one port apart.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/net/certs.hpp"

namespace baton::actors {
inline namespace runtime {

/// What the resolver says of a host name, asked once.
struct host_answer {
  /// True if every address it resolves to is a loopback address (127/8,
  /// ::1): only processes on this machine can reach a port there (a node
  /// without TLS listens only there; a launch whose rank 0 is there runs on
  /// this machine alone).
  bool loopback = false;
  /// Why it names no address: the resolver's answer when it says the name
  /// does not exist (a typo in --master-addr), "" when it resolves or the
  /// failure may pass (a name server not answering yet).
  std::string unknown;
};

host_answer look_up(const std::string& host);

/// look_up(host).loopback.
bool loopback_only(const std::string& host);

/// A rank's node as rank 0 learns it at the rendezvous.
struct launch_peer {
  int32_t rank = 0;
  std::string name; ///< its node's name
  std::string host; ///< where its node listens; "" at registration: as rank 0 sees it
  uint16_t port = 0;
};

/// How long a connection to rank 0 may take to send its registration.
inline constexpr std::chrono::seconds registration_grace{10};

/// What both sides of a job's rendezvous agree on beyond the ranks.
struct rendezvous_rules {
  std::string job_id;      ///< launch_identity::job_id; "" none
  std::string certificate; ///< with --tls-dir: this rank's certificate (DIR/NAME.pem)
  std::string key;         ///< its private key (DIR/NAME.key)
  std::string ca;          ///< the cluster CA (DIR/ca.pem); "" without TLS
  bool authenticated() const { return !ca.empty(); }
};

/// A registration line as rank 0 reads it, before any check.
struct registration {
  launch_peer peer;
  int32_t world_size = 0;
  std::string job_id; ///< "" none
  std::string proof;  ///< sign_text's token; "" without TLS
  std::string text;   ///< the line without its proof: what the proof signs (with the challenge)
};

/// The line a rank registers with, without its proof (registration::text).
std::string registration_text(const launch_peer& self, int32_t world_size,
                              const std::string& job_id = "");

/// The whole line: registration_text and `proof` ("" without TLS).
std::string registration_line(const launch_peer& self, int32_t world_size,
                              const std::string& job_id = "", const std::string& proof = "");

/// What a rank's proof signs: its registration text and rank 0's challenge.
std::string signed_registration(const std::string& text, const std::string& challenge);

/// Reads a registration line; nothing when it is not one (another program's
/// bytes, another protocol version).
std::optional<registration> parse_registration(const std::string& line);

/// Checks a registration of this job against its world size: errc::bad_config
/// saying what is wrong (another world size, a rank or port out of range, a
/// bad node name).
caf::error check_registration(const registration& r, int32_t world_size);

/// How rank 0 ended this rank's part.
struct launch_end {
  int code = 0;       ///< the exit code rank 0 sent
  std::string reason; ///< why rank 0 gave up before the job ran; "" when it ran
};

/// Rank 0's side of the rendezvous.
class rendezvous_host {
public:
  /// Listens on `port` (0: chosen by the OS) of 127.0.0.1 (`loopback`) or of
  /// every interface, for the ranks of `rules.job_id` (authenticated when
  /// `rules` has a CA). errc::bad_config "address in use" when another
  /// process has the port; errc::bad_file for a CA that cannot be read.
  static caf::expected<std::unique_ptr<rendezvous_host>>
  listen(uint16_t port, bool loopback, const rendezvous_rules& rules = {});

  ~rendezvous_host();
  rendezvous_host(const rendezvous_host&) = delete;
  rendezvous_host& operator=(const rendezvous_host&) = delete;

  /// Waits until ranks 1..world-1 have registered, at most `limit` and
  /// while `stop` is false; their nodes in rank order, a host left out
  /// filled with the address the rank connected from. What is not a
  /// registration is logged and ignored; a rank of another job, one that
  /// does not prove its identity (with a CA) and a second registration of
  /// a registered rank are refused (told why, logged) while the gathering
  /// goes on. Another world size, a rank out of range or a bad node name
  /// fail the gathering (the rank is told why), as does a registered rank
  /// that leaves; the ranks registered by then stay, to be told (finish).
  caf::expected<std::vector<launch_peer>> gather(int32_t world_size, std::chrono::seconds limit,
                                                 const std::atomic<bool>& stop);

  /// The port it listens on.
  uint16_t port() const;

  /// This host's address as the first registered rank reached it ("" with none).
  const std::string& own_address() const { return own_address_; }

  /// Waits up to `wait` for a registered rank's connection to close: its
  /// rank, or nothing while all stay.
  std::optional<int32_t> lost(std::chrono::milliseconds wait);

  /// Tells every registered rank to exit with `code`; `reason` (one line)
  /// when rank 0 gives up before the job ran, which they print.
  void finish(int code, const std::string& reason = "");

private:
  struct pending;

  rendezvous_host(int listener, rendezvous_rules rules, x509_ptr ca);

  /// Reads what the pending connection `p` sent; true when it is done with
  /// (registered, refused or ignored: no longer pending). A registration
  /// that fails the gathering sets `fatal`.
  bool take_line(pending& p, int32_t world_size, std::vector<launch_peer>& peers,
                 int32_t& missing, caf::error& fatal);

  int listener_;
  rendezvous_rules rules_;
  x509_ptr ca_; ///< the cluster CA the ranks' certificates chain to; null without TLS
  std::vector<pending> waiting_; ///< connections that have not registered yet
  std::vector<int> ranks_; ///< by rank (index 0 unused): the open connections, -1 once closed
  std::string own_address_;
};

/// Another rank's side of the rendezvous.
class rendezvous_guest {
public:
  /// Connects to rank 0 at `host`:`port`, retrying for up to `limit` (rank 0
  /// may start later) while `stop` is false, and registers `self` as a rank
  /// of `rules.job_id` (with its proof when `rules` has certificates).
  static caf::expected<std::unique_ptr<rendezvous_guest>>
  join(const std::string& host, uint16_t port, const launch_peer& self, int32_t world_size,
       std::chrono::seconds limit, const std::atomic<bool>& stop,
       const rendezvous_rules& rules = {});

  ~rendezvous_guest();
  rendezvous_guest(const rendezvous_guest&) = delete;
  rendezvous_guest& operator=(const rendezvous_guest&) = delete;

  /// Waits for rank 0's end: the exit code it sends (and why it gave up,
  /// when it did); errc::bad_config with the reason when it refused this
  /// rank; errc::node_unreachable when its connection closes without a
  /// word (rank 0 died); errc::interrupted when `stop` becomes true.
  caf::expected<launch_end> wait(const std::atomic<bool>& stop);

private:
  explicit rendezvous_guest(int fd) : fd_(fd) {}

  int fd_;
  std::string buffer_; ///< what rank 0 sent after its challenge, not read yet
};

} // namespace runtime
} // namespace baton::actors
