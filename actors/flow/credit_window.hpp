#pragma once

#include <cstdint>

namespace baton::actors {
inline namespace flow {

/// The sender's side of a credit-based flow-control edge: at most `size`
/// messages may be in flight (sent and not yet credited back by the receiver).
/// Plain data, no CAF: a stage acts when its input is ready *and* every output
/// window has a free slot.
class credit_window {
public:
  /// A window of `size` >= 1 slots.
  explicit credit_window(int32_t size = 1);

  /// True when one more message may be sent.
  bool can_send() const { return in_flight_ < size_; }

  /// Records a sent message. Precondition: can_send().
  void on_send();

  /// Records `slots` credits returned by the receiver. Returns false (and
  /// changes nothing) when that would credit more messages than were sent:
  /// a confused or malicious peer.
  bool on_credit(int32_t slots = 1);

  int32_t size() const { return size_; }
  int32_t in_flight() const { return in_flight_; }
  /// The largest number of messages ever in flight at once.
  int32_t peak_in_flight() const { return peak_in_flight_; }
  /// Messages sent in total.
  int64_t sent() const { return sent_; }

private:
  int32_t size_;
  int32_t in_flight_ = 0;
  int32_t peak_in_flight_ = 0;
  int64_t sent_ = 0;
};

} // namespace flow
} // namespace baton::actors
