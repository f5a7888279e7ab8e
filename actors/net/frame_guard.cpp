#include "actors/net/frame_guard.hpp"

#include <algorithm>
#include <cstring>

namespace baton::actors {
inline namespace net {

namespace {

// CAF 0.17 basp::message_type values of the two handshakes.
constexpr unsigned char server_handshake = 0x00;
constexpr unsigned char client_handshake = 0x01;

} // namespace

/// BASP's payload_len: bytes 4..7 (after operation, two padding bytes and
/// flags), big-endian as CAF's binary_serializer writes every integer.
uint32_t frame_payload_length(const unsigned char* header) {
  return (uint32_t{header[4]} << 24) | (uint32_t{header[5]} << 16) | (uint32_t{header[6]} << 8) |
         uint32_t{header[7]};
}

bool handshake_budget::reserve(size_t bytes) {
  auto left = available_.load();
  do {
    if (left < bytes)
      return false;
  } while (!available_.compare_exchange_weak(left, left - bytes));
  return true;
}

void handshake_budget::release(size_t bytes) {
  available_.fetch_add(bytes);
}

handshake_budget& handshake_budget::process_wide() {
  static handshake_budget budget{handshake_budget_bytes};
  return budget;
}

bool frame_budget::reserve_or_wait(size_t bytes, std::function<void()> wake, uint64_t& ticket) {
  std::lock_guard<std::mutex> lock{mutex_};
  if (available_ >= bytes) {
    available_ -= bytes;
    return true;
  }
  ticket = next_ticket_++;
  waiters_.emplace(ticket, std::move(wake));
  return false;
}

void frame_budget::release(size_t bytes) {
  std::map<uint64_t, std::function<void()>> woken;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    available_ += bytes;
    woken.swap(waiters_);
  }
  for (auto& [ticket, wake] : woken)
    if (wake)
      wake();
}

void frame_budget::cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock{mutex_};
  waiters_.erase(ticket);
}

size_t frame_budget::available() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return available_;
}

size_t frame_budget::waiting() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return waiters_.size();
}

frame_budget& frame_budget::process_wide() {
  static frame_budget budget{frame_budget_bytes};
  return budget;
}

frame_budget& frame_budget::small_frames_process_wide() {
  static frame_budget budget{small_frame_budget_bytes};
  return budget;
}

frame_guard::frame_guard(frame_limits limits, handshake_budget* budget, frame_budget* frames,
                         frame_budget* small_frames)
    : limits_(limits), budget_(budget), frame_budget_(frames), small_frames_(small_frames) {}

frame_guard::~frame_guard() {
  if (budget_ != nullptr && reserved_ > 0)
    budget_->release(reserved_);
  if (held_in_ != nullptr && waiting_)
    held_in_->cancel(ticket_);
  if (held_in_ != nullptr && frame_reserved_ > 0)
    held_in_->release(frame_reserved_);
}

bool frame_guard::retry() {
  if (!waiting_ || refused())
    return false;
  held_in_->cancel(ticket_); // a wake-up from a release that raced with this call
  auto length = frame_payload_length(header_);
  if (!held_in_->reserve_or_wait(length, wake_, ticket_))
    return false;
  waiting_ = false;
  frame_reserved_ = length;
  start_payload(length);
  return true;
}

size_t frame_guard::header_missing() const {
  return waiting_ || in_payload_ || refused() ? 0 : basp_header_bytes - header_filled_;
}

bool frame_guard::feed(const void* data, size_t size) {
  auto bytes = static_cast<const unsigned char*>(data);
  while (size > 0 && !refused()) {
    if (waiting_) { // the transport does not read while a frame waits
      reason_ = "bytes received while a frame waits for the frame budget";
      refused_length_ = frame_payload_length(header_);
      break;
    }
    if (in_payload_) {
      auto n = static_cast<size_t>(std::min<uint64_t>(payload_left_, size));
      payload_left_ -= n;
      bytes += n;
      size -= n;
      if (payload_left_ == 0)
        frame_complete();
      continue;
    }
    auto n = std::min(basp_header_bytes - header_filled_, size);
    std::memcpy(header_ + header_filled_, bytes, n);
    header_filled_ += n;
    bytes += n;
    size -= n;
    if (header_filled_ == basp_header_bytes)
      check_header();
  }
  return !refused();
}

void frame_guard::check_header() {
  auto length = frame_payload_length(header_);
  auto refuse = [&](std::string why) {
    refused_length_ = length;
    reason_ = std::move(why);
  };
  if (!handshake_done_) {
    // CAF sends its handshake before anything else on both sides of a
    // connection, so any other first frame is not from a CAF peer.
    if (header_[0] != server_handshake && header_[0] != client_handshake)
      return refuse("first frame is not a BASP handshake (operation " +
                    std::to_string(header_[0]) + ", " + std::to_string(length) +
                    " bytes announced)");
    if (length > limits_.handshake_bytes)
      return refuse("handshake frame announces " + std::to_string(length) +
                    " bytes, more than the limit of " + std::to_string(limits_.handshake_bytes));
    if (budget_ != nullptr) {
      if (!budget_->reserve(length))
        return refuse("handshake frame announces " + std::to_string(length) +
                      " bytes while the handshakes in progress already hold the budget (" +
                      std::to_string(handshake_budget_bytes) + " bytes)");
      reserved_ = length;
    }
  } else if (length > limits_.frame_bytes) {
    return refuse("frame announces " + std::to_string(length) + " bytes, more than the limit of " +
                  std::to_string(limits_.frame_bytes));
  } else if (!reserve_frame(length)) {
    return; // waits for the frame budget: retry()
  }
  start_payload(length);
}

bool frame_guard::reserve_frame(uint32_t length) {
  frame_budget* budget = length <= small_frame_payload ? small_frames_ : frame_budget_;
  if (budget == nullptr || length == 0)
    return true;
  held_in_ = budget;
  if (budget->reserve_or_wait(length, wake_, ticket_)) {
    frame_reserved_ = length;
    return true;
  }
  waiting_ = true;
  return false;
}

void frame_guard::start_payload(uint32_t length) {
  ++headers_;
  header_filled_ = 0;
  payload_left_ = length;
  in_payload_ = true;
  if (length == 0)
    frame_complete();
}

void frame_guard::frame_complete() {
  in_payload_ = false;
  ++frames_count_;
  if (held_in_ != nullptr && frame_reserved_ > 0) {
    auto held = frame_reserved_;
    frame_reserved_ = 0;
    held_in_->release(held);
  }
  if (!handshake_done_) {
    handshake_done_ = true;
    if (budget_ != nullptr && reserved_ > 0)
      budget_->release(reserved_);
    reserved_ = 0;
  }
}

} // namespace net
} // namespace baton::actors
