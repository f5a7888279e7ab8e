#include "actors/flow/fanout.hpp"

#include <algorithm>

#include <caf/node_id.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {
inline namespace flow {

void fanout::add(caf::actor receiver, const std::string& from, const std::string& to,
                 int32_t window) {
  receivers_.push_back({std::move(receiver), credit_window{window}, {}, {from, to, 0, 0}});
}

size_t fanout::pick(const messages::microbatch& m) const {
  if (dealing_ == dealing::turns)
    return turn_of(m.id, receivers_.size());
  if (m.eval)
    return 0;
  return static_cast<size_t>(m.index_in_step) % receivers_.size();
}

bool fanout::can_send(const messages::microbatch& m) const {
  if (receivers_.empty())
    return false;
  if (dealing_ != dealing::broadcast)
    return receivers_[pick(m)].window.can_send();
  return std::all_of(receivers_.begin(), receivers_.end(),
                     [](const receiver& r) { return r.window.can_send(); });
}

void fanout::send(caf::event_based_actor* self, messages::microbatch m) {
  dropped_last_ = false;
  if (dealing_ != dealing::broadcast)
    return send_to(self, receivers_[pick(m)], std::move(m));
  for (size_t i = 0; i + 1 < receivers_.size(); ++i)
    send_to(self, receivers_[i], m); // a copy shares the payload's storage
  send_to(self, receivers_.back(), std::move(m));
}

void fanout::send_to(caf::event_based_actor* self, receiver& r, messages::microbatch m) {
  r.window.on_send();
  r.in_flight.push_back(m.id);
  if (!m.eval && m.step == r.drop_step) {
    dropped_last_ = true;
    r.drop_step = -1;
    return;
  }
  r.edge.messages += 1;
  r.edge.bytes += messages::payload_bytes(m);
  if (r.delay.count() > 0)
    self->delayed_send(r.handle, r.delay, std::move(m));
  else
    self->send(r.handle, std::move(m));
}

bool fanout::inject(const std::string& to, std::chrono::milliseconds delay, int64_t drop_step) {
  for (auto& r : receivers_)
    if (r.edge.to == to) {
      r.delay = delay;
      r.drop_step = drop_step;
      return true;
    }
  return false;
}

void fanout::broadcast(caf::event_based_actor* self, const messages::control& c) const {
  for (const auto& r : receivers_)
    if (r.delay.count() > 0)
      self->delayed_send(r.handle, r.delay, c);
    else
      self->send(r.handle, c);
}

namespace {

std::string name_of(const caf::actor& a) {
  return a ? std::to_string(a.id()) + "@" + to_string(a.node()) : std::string{"nobody"};
}

} // namespace

std::string fanout::take_credit(const caf::actor& from, const messages::credit& c) {
  if (c.invalid)
    return "an invalid credit: " + describe(c.invalid);
  if (c.slots != 1)
    return "a credit of " + std::to_string(c.slots) + " slots (each microbatch returns one)";
  auto in_flight = [&](const receiver& r) {
    return std::find(r.in_flight.begin(), r.in_flight.end(), c.microbatch_id);
  };
  auto has_it = [&](const receiver& r) { return in_flight(r) != r.in_flight.end(); };
  // The sender's handle first: broadcasting, every receiver has the id.
  auto r = std::find_if(receivers_.begin(), receivers_.end(),
                        [&](const receiver& x) { return x.handle == from && has_it(x); });
  if (r == receivers_.end())
    r = std::find_if(receivers_.begin(), receivers_.end(), has_it);
  if (r == receivers_.end())
    return refused(from, c);
  if (r->handle != from && !warned_sender_) {
    warned_sender_ = true;
    spdlog::warn("{}: the credit of microbatch {} came from actor {}, not from '{}' ({}) that "
                 "it was sent to; credited to '{}' all the same",
                 r->edge.from, c.microbatch_id, name_of(from), r->edge.to, name_of(r->handle),
                 r->edge.to);
  }
  r->in_flight.erase(in_flight(*r));
  r->window.on_credit(1);
  return {};
}

std::string fanout::refused(const caf::actor& from, const messages::credit& c) const {
  std::string text = "a credit of microbatch " + std::to_string(c.microbatch_id) +
                     " from actor " + name_of(from) + ", which no receiver has in flight (";
  for (size_t i = 0; i < receivers_.size(); ++i) {
    const auto& r = receivers_[i];
    text += (i > 0 ? "; " : "") + r.edge.to + " = " + name_of(r.handle) + ": " +
            std::to_string(r.in_flight.size()) + " in flight";
  }
  return text + ")";
}

std::vector<messages::edge_stats> fanout::edges() const {
  std::vector<messages::edge_stats> out;
  for (const auto& r : receivers_)
    out.push_back(r.edge);
  return out;
}

std::string fanout::blocked_on() const {
  std::string text;
  for (const auto& r : receivers_)
    if (!r.window.can_send())
      text += (text.empty() ? "credits from " : ", ") + r.edge.to + " (" +
              std::to_string(r.in_flight.size()) + " in flight)";
  return text;
}

} // namespace flow
} // namespace baton::actors
