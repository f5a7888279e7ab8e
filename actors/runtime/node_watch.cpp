#include "actors/runtime/node_watch.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/runtime/spawner.hpp"

namespace baton::actors {
inline namespace runtime {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

using watch_tick_atom = caf::atom_constant<caf::atom("watchtick")>;

} // namespace

liveness_limits liveness_limits_of(const cluster& c) {
  liveness_limits l;
  l.late = c.runtime.connection_timeout;
  // At least four pings per limit: a heartbeat_ms near or above
  // connection_timeout_ms must not make every node late between two pings.
  l.interval = std::max(milliseconds{1}, std::min(c.runtime.heartbeat_interval, l.late / 4));
  // A job that restarts from checkpoints gains nothing by waiting: the
  // sooner a node counts as lost, the sooner it runs again elsewhere.
  l.lost = c.recovers() ? l.late : std::max(l.late, c.runtime.slow_node_timeout);
  l.report_every = std::max(l.late, milliseconds{5000});
  return l;
}

// -- node_liveness -------------------------------------------------------------------

void node_liveness::add(const std::string& node, clock_type::time_point now) {
  peers_.push_back(peer{node, now, now, false});
}

std::vector<liveness_event> node_liveness::tick(clock_type::time_point now,
                                                milliseconds& paused) {
  auto gap = duration_cast<milliseconds>(now - last_tick_);
  last_tick_ = now;
  // Ticks come every interval: one this late means the process stood still.
  paused = gap > std::max(3 * limits_.interval, limits_.late / 2) ? gap : milliseconds{0};
  if (paused.count() > 0)
    for (auto& p : peers_)
      p.heard = std::max(p.heard, now);
  std::vector<liveness_event> events;
  for (auto& p : peers_)
    if (auto e = judge(p, now))
      events.push_back(std::move(*e));
  peers_.erase(std::remove_if(peers_.begin(), peers_.end(),
                              [&](const peer& p) { return now - p.heard >= limits_.lost; }),
               peers_.end());
  return events;
}

std::optional<liveness_event> node_liveness::judge(peer& p, clock_type::time_point now) {
  auto silent = duration_cast<milliseconds>(now - p.heard);
  if (silent < limits_.late)
    return std::nullopt;
  bool due = !p.late || silent >= limits_.lost || now - p.reported >= limits_.report_every;
  if (!due)
    return std::nullopt;
  p.late = true;
  p.reported = now;
  return liveness_event{false, p.node, silent};
}

std::optional<liveness_event> node_liveness::heard(const std::string& node,
                                                   clock_type::time_point now) {
  for (auto& p : peers_) {
    if (p.node != node)
      continue;
    auto silent = duration_cast<milliseconds>(now - p.heard);
    p.heard = now;
    if (!p.late)
      return std::nullopt;
    p.late = false;
    return liveness_event{true, node, silent};
  }
  return std::nullopt;
}

std::vector<std::string> node_liveness::watched() const {
  std::vector<std::string> nodes;
  for (const auto& p : peers_)
    nodes.push_back(p.node);
  return nodes;
}

// -- the watch actor -------------------------------------------------------------------

namespace {

struct watch_state {
  caf::actor coordinator;
  liveness_limits limits;
  node_liveness judged{{}, {}};
  std::vector<std::pair<std::string, caf::actor>> pulses;
  static inline const char* name = "node_watch";

  const std::string* node_of(const caf::strong_actor_ptr& sender) const {
    for (const auto& [node, pulse] : pulses)
      if (sender != nullptr && pulse.address() == sender->address())
        return &node;
    return nullptr;
  }
};

using watch_actor = caf::stateful_actor<watch_state>;

void send_event(watch_actor* self, const liveness_event& e) {
  auto& to = self->state.coordinator;
  if (e.back)
    self->send(to, back_atom::value, e.node, static_cast<int64_t>(e.silent.count()));
  else
    self->send(to, late_atom::value, e.node, static_cast<int64_t>(e.silent.count()));
}

/// A pause as a person reads it: milliseconds under 10 s (the limits a pause
/// is judged against are often that short), seconds above.
std::string pause_text(milliseconds paused) {
  if (paused < std::chrono::seconds{10})
    return std::to_string(paused.count()) + " ms";
  return fmt::format("{:.1f} s", paused.count() / 1000.0);
}

void on_tick(watch_actor* self) {
  auto& s = self->state;
  milliseconds paused{0};
  auto events = s.judged.tick(node_liveness::clock_type::now(), paused);
  if (paused.count() > 0)
    spdlog::warn("this process did not run for {} (stopped, e.g. Ctrl-Z, or starved): "
                 "every node gets {} ms from now to answer before it counts as late",
                 pause_text(paused), s.limits.late.count());
  for (const auto& e : events)
    send_event(self, e);
  for (const auto& node : s.judged.watched())
    for (const auto& [name, pulse] : s.pulses)
      if (name == node)
        self->send(pulse, pulse_atom::value);
  self->delayed_send(self, s.limits.interval, watch_tick_atom::value);
}

caf::behavior watch_behavior(watch_actor* self, caf::actor coordinator, liveness_limits limits,
                             std::vector<std::pair<std::string, caf::actor>> pulses) {
  auto& s = self->state;
  auto now = node_liveness::clock_type::now();
  s.coordinator = std::move(coordinator);
  s.limits = limits;
  s.judged = node_liveness{limits, now};
  s.pulses = std::move(pulses);
  for (const auto& [node, pulse] : s.pulses)
    s.judged.add(node, now);
  self->send(self, watch_tick_atom::value);
  return {
    [=](watch_tick_atom) { on_tick(self); },
    [=](pulse_atom) {
      const auto* node = self->state.node_of(self->current_sender());
      if (node == nullptr)
        return;
      if (auto e = self->state.judged.heard(*node, node_liveness::clock_type::now()))
        send_event(self, *e);
    },
  };
}

} // namespace

caf::actor spawn_node_watch(caf::actor_system& sys, const caf::actor& coordinator,
                            liveness_limits limits,
                            std::vector<std::pair<std::string, caf::actor>> pulses) {
  return sys.spawn<caf::hidden>(watch_behavior, coordinator, limits, std::move(pulses));
}

} // namespace runtime
} // namespace baton::actors
