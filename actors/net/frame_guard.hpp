#pragma once

// The length check CAF 0.17 leaves out of BASP, its wire protocol.
//
// A BASP frame is a 32-byte header and a payload whose length the header
// announces (a big-endian uint32 at bytes 4..7). CAF's broker reads the
// header, then resizes the connection's read buffer to that length (zero
// filled) before a single payload byte has arrived: one header announcing
// 0xFFFFFFFF costs the receiver 4 GiB, from anyone who can open a TCP
// connection to it. A frame_guard follows the frames of one connection's
// byte stream as it is received and refuses a header before CAF sees it:
//
//   byte stream:  | header | payload ... | header | payload ... | ...
//   first frame:  a handshake (server or client), at most handshake_bytes,
//                 and its length reserved from a budget shared by every
//                 connection whose handshake has not arrived yet
//   later frames: at most frame_bytes (baton messages are <= 64 MiB)
//
// It is CAF-free: framed_transport.cpp feeds it from the socket reads of
// the scribes it makes; the tests and the fuzzer feed it bytes directly.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace baton::actors {
inline namespace net {

/// Bytes of a BASP header (CAF 0.17 basp::header_size).
constexpr size_t basp_header_bytes = 32;

/// Largest payload of a frame after the handshake: a message of at most
/// 64 MiB (the project's rule, DESIGN.md) plus CAF's framing of it (message
/// header, type names, forwarding stack), for which 1 MiB is ample.
constexpr uint32_t max_frame_payload = (64u << 20) + (1u << 20);

/// Largest handshake payload. CAF's handshakes carry a node id, application
/// identifiers and the published actor with its interface names: baton's
/// are about 100 bytes.
constexpr uint32_t max_handshake_payload = 64u << 10;

/// Sum of the handshake payloads announced on connections that have not
/// received them yet: 256 maximal handshakes. What a flood of half-open
/// connections can make a process allocate, however many there are.
constexpr size_t handshake_budget_bytes = 16u << 20;

/// Memory shared by connections that are still in their handshake: bytes
/// are reserved when a handshake header announces its length and released
/// when its payload has arrived or the connection closes. Thread-safe.
class handshake_budget {
public:
  /// A budget of `bytes`.
  explicit handshake_budget(size_t bytes) : available_(bytes) {}

  /// Takes `bytes` from the budget; false (and nothing taken) if fewer are left.
  bool reserve(size_t bytes);

  /// Gives back `bytes` taken by reserve().
  void release(size_t bytes);

  /// Bytes not reserved now.
  size_t available() const { return available_.load(); }

  /// The budget every framed connection of this process shares
  /// (handshake_budget_bytes).
  static handshake_budget& process_wide();

private:
  std::atomic<size_t> available_;
};

/// What a connection may receive.
struct frame_limits {
  uint32_t handshake_bytes = max_handshake_payload; ///< first frame's payload
  uint32_t frame_bytes = max_frame_payload;         ///< any later frame's payload
};

/// Follows the BASP frames of one connection (bytes in the order received)
/// and says when a header announces more than it may. Not thread-safe: one
/// connection, one reader.
class frame_guard {
public:
  /// A guard for a new connection with the default limits and the process's
  /// handshake budget.
  frame_guard() : frame_guard(frame_limits{}, &handshake_budget::process_wide()) {}

  /// A guard for a new connection; `budget` (not owned, may be null: no
  /// shared bound) must outlive it.
  frame_guard(frame_limits limits, handshake_budget* budget);

  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;

  /// Releases what the handshake still holds of the budget.
  ~frame_guard();

  /// Feeds `size` received bytes. Returns false if a header among them, or
  /// an earlier one, was refused: the caller must close the connection
  /// without handing these bytes on. A refused guard stays refused.
  bool feed(const void* data, size_t size);

  /// True once a header was refused.
  bool refused() const { return !reason_.empty(); }

  /// Why the header was refused (names the announced length and the limit);
  /// empty while nothing was refused.
  const std::string& reason() const { return reason_; }

  /// Payload length announced by the refused header (0 if none).
  uint32_t refused_length() const { return refused_length_; }

  /// True once the first frame (the handshake) has been received whole.
  bool handshake_done() const { return handshake_done_; }

  /// Complete frames received so far.
  uint64_t frames() const { return frames_; }

private:
  /// Checks the header in header_; sets reason_ when it is refused.
  void check_header();
  void frame_complete();

  frame_limits limits_;
  handshake_budget* budget_;
  unsigned char header_[basp_header_bytes] = {};
  size_t header_filled_ = 0;      ///< header bytes received of the current frame
  uint64_t payload_left_ = 0;     ///< payload bytes still to come
  bool in_payload_ = false;       ///< a header was accepted, its payload is arriving
  bool handshake_done_ = false;
  size_t reserved_ = 0;           ///< bytes this connection holds of budget_
  uint64_t frames_ = 0;
  uint32_t refused_length_ = 0;
  std::string reason_;
};

} // namespace net
} // namespace baton::actors
