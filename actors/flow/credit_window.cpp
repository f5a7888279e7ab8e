#include "actors/flow/credit_window.hpp"

#include <cassert>

namespace baton::actors {
inline namespace flow {

credit_window::credit_window(int32_t size) : size_(size) {
  assert(size >= 1 && "a credit window needs at least one slot");
}

void credit_window::on_send() {
  assert(can_send() && "sent a message without a free credit");
  ++in_flight_;
  ++sent_;
  if (in_flight_ > peak_in_flight_)
    peak_in_flight_ = in_flight_;
}

bool credit_window::on_credit(int32_t slots) {
  if (slots < 1 || slots > in_flight_)
    return false;
  in_flight_ -= slots;
  return true;
}

} // namespace flow
} // namespace baton::actors
