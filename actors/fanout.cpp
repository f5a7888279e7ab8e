#include "actors/fanout.hpp"

#include <caf/node_id.hpp>
#include <caf/send.hpp>

#include "messages/codec.hpp"
#include "messages/type_ids.hpp"

namespace baton::actors {

void fanout::add(caf::actor receiver, const std::string& from, const std::string& to,
                 int32_t window) {
  receivers_.push_back({std::move(receiver), credit_window{window}, {from, to, 0, 0}});
}

size_t fanout::pick(const messages::microbatch& m) const {
  if (m.eval)
    return 0;
  return static_cast<size_t>(m.index_in_step) % receivers_.size();
}

bool fanout::can_send(const messages::microbatch& m) const {
  return receivers_[pick(m)].window.can_send();
}

void fanout::send(caf::event_based_actor* self, messages::microbatch m) {
  auto& r = receivers_[pick(m)];
  r.window.on_send();
  dropped_last_ = !m.eval && m.step == r.drop_step;
  if (dropped_last_) {
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

bool fanout::on_credit(const caf::actor& from, int32_t slots) {
  for (auto& r : receivers_)
    if (r.handle == from)
      return r.window.on_credit(slots);
  return false;
}

std::string fanout::refusal(const caf::actor& from, int32_t slots) const {
  auto name = [](const caf::actor& a) {
    return a ? std::to_string(a.id()) + "@" + to_string(a.node()) : std::string{"nobody"};
  };
  std::string text = "a credit of " + std::to_string(slots) + " from actor " + name(from);
  for (const auto& r : receivers_)
    if (r.handle == from)
      return text + " ('" + r.edge.to + "'), which has " + std::to_string(r.window.in_flight()) +
             " in flight";
  text += ", which is not a receiver (";
  for (size_t i = 0; i < receivers_.size(); ++i)
    text += (i > 0 ? ", " : "") + receivers_[i].edge.to + " = " + name(receivers_[i].handle);
  return text + ")";
}

std::vector<messages::edge_stats> fanout::edges() const {
  std::vector<messages::edge_stats> out;
  for (const auto& r : receivers_)
    out.push_back(r.edge);
  return out;
}

} // namespace baton::actors
