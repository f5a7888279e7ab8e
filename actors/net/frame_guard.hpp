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
//   later frames: at most frame_bytes (baton messages are <= 64 MiB), and
//                 every payload reserved from a budget shared by every
//                 connection of the process (frame_budget): one for frames
//                 over 64 KiB, one of their own for the small ones (so that
//                 they never wait behind large ones); a header that does
//                 not fit waits, and its connection is not read, until
//                 other frames have arrived
//
// It is CAF-free: framed_transport.cpp feeds it from the socket reads of
// the scribes it makes; the tests and the fuzzer feed it bytes directly.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace baton::actors {
inline namespace net {

/// Bytes of a BASP header (CAF 0.17 basp::header_size).
constexpr size_t basp_header_bytes = 32;

/// The payload length a BASP header (basp_header_bytes bytes) announces.
uint32_t frame_payload_length(const unsigned char* header);

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

/// Payload bytes that the frames in flight on all connections of a process
/// may announce together, once their handshakes are done: about 4 frames of
/// the largest size. 100 handshaken peers announcing 60 MiB each used to
/// cost a node 4 GB; they now wait for this budget.
constexpr size_t frame_budget_bytes = 256u << 20;

/// A frame up to this payload is small: it is counted in the small-frame
/// budget, not in the frame budget, so that small messages (spawn
/// requests, credits, reports) flow while large ones wait.
constexpr uint32_t small_frame_payload = 64u << 10;

/// Payload bytes that the small frames in flight on all connections of a
/// process may announce together: 256 of the largest. Every connection
/// may hold one, so without this bound 6,000 handshaken peers announcing
/// 64 KiB each cost a node 400 MB.
constexpr size_t small_frame_budget_bytes = 16u << 20;

/// Memory shared by the frames in flight on every connection of a process:
/// bytes are reserved when a header announces its payload and released when
/// the payload has arrived or the connection closes. A reservation that does
/// not fit leaves a wake-up call, made when bytes are released. Thread-safe.
class frame_budget {
public:
  /// A budget of `bytes`.
  explicit frame_budget(size_t bytes) : capacity_(bytes), available_(bytes) {}

  frame_budget(const frame_budget&) = delete;
  frame_budget& operator=(const frame_budget&) = delete;

  /// Takes `bytes` and returns true; or, if fewer are left, takes nothing,
  /// registers `wake` (called once, on the thread of the next release())
  /// under `ticket` and returns false.
  bool reserve_or_wait(size_t bytes, std::function<void()> wake, uint64_t& ticket);

  /// Gives back `bytes` taken by reserve_or_wait() and calls every wake-up
  /// registered until now (outside the lock: a call may come after a
  /// cancel() that raced with it, so `wake` must not hold what its owner's
  /// destruction frees).
  void release(size_t bytes);

  /// Removes the wake-up registered under `ticket`, if it is still there.
  void cancel(uint64_t ticket);

  /// Bytes not reserved now.
  size_t available() const;

  /// Bytes of the whole budget.
  size_t capacity() const { return capacity_; }

  /// Wake-ups registered now (connections waiting).
  size_t waiting() const;

  /// The budget every framed connection of this process shares
  /// (frame_budget_bytes).
  static frame_budget& process_wide();

  /// The budget of the small frames of every framed connection of this
  /// process (small_frame_budget_bytes).
  static frame_budget& small_frames_process_wide();

private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  size_t available_;
  uint64_t next_ticket_ = 1;
  std::map<uint64_t, std::function<void()>> waiters_; ///< by ticket: first come, first woken
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
  /// handshake, frame and small-frame budgets.
  frame_guard()
      : frame_guard(frame_limits{}, &handshake_budget::process_wide(),
                    &frame_budget::process_wide(), &frame_budget::small_frames_process_wide()) {}

  /// A guard for a new connection; `budget`, `frames` (frames over
  /// small_frame_payload) and `small_frames` (the others) (not owned, may be
  /// null: no shared bound) must outlive it.
  frame_guard(frame_limits limits, handshake_budget* budget, frame_budget* frames = nullptr,
              frame_budget* small_frames = nullptr);

  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;

  /// Releases what the connection still holds of both budgets and cancels
  /// its wake-up.
  ~frame_guard();

  /// Feeds `size` received bytes. Returns false if a header among them, or
  /// an earlier one, was refused: the caller must close the connection
  /// without handing these bytes on. A refused guard stays refused. A
  /// header that must wait for the frame budget (waiting()) ends what is
  /// taken: bytes fed while it waits are refused, so the caller stops
  /// reading until retry() succeeds.
  bool feed(const void* data, size_t size);

  /// What to call when a waiting frame may fit (from the thread releasing
  /// budget): the owner then calls retry() on its own thread.
  void on_wake(std::function<void()> wake) { wake_ = std::move(wake); }

  /// True while a complete header waits for the frame budget.
  bool waiting() const { return waiting_; }

  /// The budget the current frame holds or waits for (null when none):
  /// for the log.
  const frame_budget* current_budget() const { return held_in_; }

  /// Tries the waiting header's reservation again; true once it has its
  /// bytes (its payload may come), false while it still waits (a new
  /// wake-up is registered) or if nothing waits.
  bool retry();

  /// Bytes of the current frame's header still to come (0 while a header
  /// waits or a payload arrives).
  size_t header_missing() const;

  /// Headers let through so far (each then has its payload read).
  uint64_t headers() const { return headers_; }

  /// The last complete header (basp_header_bytes bytes), valid until more
  /// bytes are fed.
  const unsigned char* header() const { return header_; }

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
  uint64_t frames() const { return frames_count_; }

  /// Payload bytes this connection holds of the frame budgets now.
  size_t frame_reserved() const { return frame_reserved_; }

private:
  /// Checks the header in header_; sets reason_ when it is refused.
  void check_header();
  /// Reserves the payload of a frame after the handshake; false: waits.
  bool reserve_frame(uint32_t length);
  void start_payload(uint32_t length);
  void frame_complete();

  frame_limits limits_;
  handshake_budget* budget_;
  frame_budget* frame_budget_;
  frame_budget* small_frames_;
  frame_budget* held_in_ = nullptr; ///< the budget of frame_reserved_ or of the wait
  std::function<void()> wake_;
  bool waiting_ = false;
  uint64_t ticket_ = 0;           ///< the wake-up registered while waiting
  size_t frame_reserved_ = 0;     ///< bytes this connection holds of held_in_
  uint64_t headers_ = 0;
  unsigned char header_[basp_header_bytes] = {};
  size_t header_filled_ = 0;      ///< header bytes received of the current frame
  uint64_t payload_left_ = 0;     ///< payload bytes still to come
  bool in_payload_ = false;       ///< a header was accepted, its payload is arriving
  bool handshake_done_ = false;
  size_t reserved_ = 0;           ///< bytes this connection holds of budget_
  uint64_t frames_count_ = 0;
  uint32_t refused_length_ = 0;
  std::string reason_;
};

} // namespace net
} // namespace baton::actors
