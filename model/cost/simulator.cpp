#include "model/cost/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <utility>

#include "model/core/error.hpp"

namespace baton::model::cost {

operation operation::compute(double seconds, time_kind as) {
  operation o;
  o.kind = kind_t::compute;
  o.seconds = seconds;
  o.as = as;
  return o;
}

operation operation::send(int32_t to, double bytes, int32_t window) {
  operation o;
  o.kind = kind_t::send;
  o.peer = to;
  o.bytes = bytes;
  o.window = window;
  return o;
}

operation operation::receive(int32_t from, time_kind blocked_as) {
  operation o;
  o.kind = kind_t::receive;
  o.peer = from;
  o.as = blocked_as;
  return o;
}

operation operation::step_end() {
  operation o;
  o.kind = kind_t::step_end;
  return o;
}

namespace {

constexpr double never = std::numeric_limits<double>::infinity();
/// Seconds below which a computation is done (rounding of the rates).
constexpr double epsilon = 1e-12;

void expect(bool ok, const std::string& what) {
  if (!ok)
    throw error("simulator: expected " + what);
}

/// One step of an actor's expanded program: a send is its CPU work then its
/// post, a receive its wait then its CPU work.
struct step {
  enum class kind_t { cpu, post, wait, mark } kind = kind_t::cpu;
  double seconds = 0;  ///< cpu
  double bytes = 0;    ///< post
  int32_t peer = -1;   ///< post, wait
  int32_t window = 0;  ///< post
  time_kind as = time_kind::compute;
};

/// An actor as it runs.
struct running {
  std::vector<step> steps;
  size_t next = 0;          ///< the step it is at
  bool started = false;     ///< whether the cpu step it is at has started
  double remaining = 0;     ///< of the cpu step in progress
  int32_t marks = 0;        ///< step_ends passed
  std::vector<double> mark_times;
  double kinds[3] = {0, 0, 0}; ///< measured time by time_kind
  bool done() const { return next >= steps.size(); }
};

/// The state of the whole simulation.
class engine {
public:
  explicit engine(const simulated_plan& p) : plan_(p) {
    for (const auto& a : p.actors) {
      running r;
      r.steps = expand(a);
      actors_.push_back(std::move(r));
    }
    sending_.assign(p.hosts.size(), 0);
    receiving_.assign(p.hosts.size(), 0);
    tokens_out_.assign(p.hosts.size(), p.link.burst);
    tokens_in_.assign(p.hosts.size(), p.link.burst);
  }

  simulation run();

private:
  using edge = std::pair<int32_t, int32_t>; // from, to
  struct arrival {
    double at;
    edge on;
    double bytes;
    bool operator>(const arrival& o) const { return at > o.at; }
  };

  bool cross_host(int32_t from, int32_t to) const {
    return plan_.actors[static_cast<size_t>(from)].host != plan_.actors[static_cast<size_t>(to)].host;
  }

  std::vector<step> expand(const simulated_actor& a) const;
  bool advance(size_t index);
  double rate_of(size_t index) const;
  void account(double dt);
  [[noreturn]] void deadlock() const;

  const simulated_plan& plan_;
  std::vector<running> actors_;
  std::map<edge, std::deque<double>> arrived_; ///< delivered, not yet received: their bytes
  std::map<edge, int32_t> in_flight_; ///< posted, not yet received
  std::priority_queue<arrival, std::vector<arrival>, std::greater<>> arrivals_;
  /// A message on the wire: its bytes not yet sent. Each pair of hosts has
  /// one connection each way (the nodes' TCP connection), which sends its
  /// messages in order: the first on a connection is sent, the others wait
  /// behind it; the connections sending at once share the hosts' links
  /// fairly.
  struct transfer {
    edge on;
    size_t from_host, to_host;
    double bytes, remaining;
  };
  std::vector<transfer> wire_; ///< in the order they were posted
  std::vector<int32_t> sending_, receiving_; ///< transfers sent now, per host and direction
  /// Whether wire_[k] is the first message of its connection (is being sent).
  bool sending_now(size_t k) const {
    for (size_t j = 0; j < k; ++j)
      if (wire_[j].from_host == wire_[k].from_host && wire_[j].to_host == wire_[k].to_host)
        return false;
    return true;
  }
  void count_sending() {
    std::fill(sending_.begin(), sending_.end(), 0);
    std::fill(receiving_.begin(), receiving_.end(), 0);
    for (size_t k = 0; k < wire_.size(); ++k)
      if (sending_now(k)) {
        ++sending_[wire_[k].from_host];
        ++receiving_[wire_[k].to_host];
      }
  }
  /// Each host's token buckets (link_model::burst), out and in: full after
  /// an idle spell, emptied by what passes at once, refilled while idle.
  std::vector<double> tokens_out_, tokens_in_;
  void refill(double dt) {
    const auto add = [&](double& tokens) {
      tokens = std::min(plan_.link.burst, tokens + dt * plan_.link.bandwidth);
    };
    for (size_t h = 0; h < sending_.size(); ++h) {
      if (sending_[h] == 0)
        add(tokens_out_[h]);
      if (receiving_[h] == 0)
        add(tokens_in_[h]);
    }
  }
  std::map<edge, double> last_arrival_;      ///< a connection delivers in order
  double rate_of(const transfer& t) const {
    const int32_t sharing = std::max(sending_[t.from_host], receiving_[t.to_host]);
    return plan_.link.bandwidth / sharing *
           (sharing >= 2 ? plan_.link.shared_efficiency : 1.0);
  }
  void deliver(const edge& e, double at, double bytes) {
    at = std::max(at, last_arrival_[e]);
    last_arrival_[e] = at;
    arrivals_.push({at, e, bytes});
  }
  std::vector<int32_t> computing_on_; ///< per machine, this instant
  double now_ = 0;
  double wire_bytes_ = 0; ///< sent between hosts in the senders' measured steps
};

std::vector<step> engine::expand(const simulated_actor& a) const {
  const auto& rt = plan_.runtime;
  std::vector<step> out;
  const int32_t self = static_cast<int32_t>(&a - plan_.actors.data());
  for (const auto& o : a.program) {
    switch (o.kind) {
    case operation::kind_t::compute:
      out.push_back({step::kind_t::cpu, o.seconds, 0, -1, 0, o.as});
      break;
    case operation::kind_t::send: {
      double cpu = rt.message_seconds;
      if (cross_host(self, o.peer))
        cpu += plan_.link.message_overhead + rt.byte_seconds * o.bytes;
      out.push_back({step::kind_t::cpu, cpu, 0, -1, 0, time_kind::communication});
      out.push_back({step::kind_t::post, 0, o.bytes, o.peer, o.window, time_kind::communication});
      break;
    }
    case operation::kind_t::receive:
      out.push_back({step::kind_t::wait, 0, 0, o.peer, 0, o.as});
      // + the bytes' deserialising, added when the message is taken.
      out.push_back({step::kind_t::cpu, rt.message_seconds, 0, o.peer, 0,
                     time_kind::communication});
      break;
    case operation::kind_t::step_end:
      out.push_back({step::kind_t::mark, 0, 0, -1, 0, time_kind::waiting});
      break;
    }
  }
  return out;
}

/// Runs actor `index`'s steps that need no time; true when it moved.
bool engine::advance(size_t index) {
  running& a = actors_[index];
  const int32_t self = static_cast<int32_t>(index);
  bool moved = false;
  while (!a.done()) {
    step& s = a.steps[a.next];
    if (s.kind == step::kind_t::cpu) {
      if (!a.started) {
        a.started = true;
        a.remaining = s.seconds;
        moved = true;
      }
      if (a.remaining > epsilon)
        return moved;
      a.started = false;
      ++a.next;
      continue;
    }
    if (s.kind == step::kind_t::post) {
      const edge e{self, s.peer};
      if (s.window > 0 && in_flight_[e] >= s.window)
        return moved;
      ++in_flight_[e];
      if (cross_host(self, s.peer)) {
        // On the wire: the host's link each way is shared by its transfers.
        const auto from = static_cast<size_t>(plan_.actors[index].host);
        const auto to = static_cast<size_t>(plan_.actors[static_cast<size_t>(s.peer)].host);
        if (a.marks >= plan_.warmup_steps)
          wire_bytes_ += s.bytes; // a measured step's
        // What both ends' buckets hold passes at once; the rest at the rate.
        const double credit = std::min({s.bytes, tokens_out_[from], tokens_in_[to]});
        tokens_out_[from] -= credit;
        tokens_in_[to] -= credit;
        if (s.bytes > credit) {
          wire_.push_back({e, from, to, s.bytes, s.bytes - credit});
        } else {
          deliver(e, now_ + plan_.link.latency, s.bytes);
        }
      } else {
        deliver(e, now_, s.bytes);
      }
    } else if (s.kind == step::kind_t::wait) {
      const edge e{s.peer, self};
      auto found = arrived_.find(e);
      if (found == arrived_.end() || found->second.empty())
        return moved;
      const double bytes = found->second.front();
      found->second.pop_front();
      --in_flight_[e];
      // The receiver's cpu step that follows pays the bytes' share.
      if (cross_host(s.peer, self))
        a.steps[a.next + 1].seconds += plan_.runtime.byte_seconds * bytes;
    } else {
      ++a.marks;
      a.mark_times.push_back(now_);
    }
    ++a.next;
    moved = true;
  }
  return moved;
}

/// The share of a core each computing actor of `index`'s machine gets:
/// the machine's cores split evenly (processor sharing), slowed by the
/// co-location of those computing at once.
double engine::rate_of(size_t index) const {
  const auto host = static_cast<size_t>(plan_.actors[index].host);
  const auto machine = static_cast<size_t>(plan_.hosts[host].machine);
  const double cores = plan_.machine_cores[machine];
  const double busy = computing_on_[machine];
  const double share = std::min(1.0, cores / busy);
  return share / (1 + plan_.runtime.colocation * (std::min(busy, cores) - 1));
}

/// Advances every computation by `dt` seconds and counts the time of each
/// actor that is past its warm-up and not done, by what it is doing.
void engine::account(double dt) {
  for (size_t k = 0; k < actors_.size(); ++k) {
    running& a = actors_[k];
    if (a.done())
      continue;
    const step& s = a.steps[a.next];
    time_kind kind = time_kind::waiting;
    if (s.kind == step::kind_t::cpu) {
      // What would end by the next event ends (no rounding left over).
      const double rate = rate_of(k);
      a.remaining = now_ + a.remaining / rate <= now_ + dt ? 0.0 : a.remaining - dt * rate;
      kind = s.as;
    } else if (s.kind == step::kind_t::post) {
      kind = time_kind::communication; // out of credits
    } else if (s.kind == step::kind_t::wait) {
      kind = s.as;
    }
    if (a.marks >= plan_.warmup_steps)
      a.kinds[static_cast<int>(kind)] += dt;
  }
}

void engine::deadlock() const {
  std::string blocked;
  for (size_t k = 0; k < actors_.size(); ++k) {
    const running& a = actors_[k];
    if (a.done())
      continue;
    const step& s = a.steps[a.next];
    blocked += (blocked.empty() ? "" : ", ") + plan_.actors[k].name +
               (s.kind == step::kind_t::wait ? " waits for " : " has no credit to ") +
               plan_.actors[static_cast<size_t>(s.peer)].name;
  }
  throw error("simulator: the plan deadlocks at " + std::to_string(now_) + " s: " + blocked);
}

simulation engine::run() {
  computing_on_.assign(plan_.machine_cores.size(), 0);
  for (;;) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t k = 0; k < actors_.size(); ++k)
        moved = advance(k) || moved;
    }
    if (std::all_of(actors_.begin(), actors_.end(), [](const running& a) { return a.done(); }))
      break;
    std::fill(computing_on_.begin(), computing_on_.end(), 0);
    for (size_t k = 0; k < actors_.size(); ++k)
      if (!actors_[k].done() && actors_[k].steps[actors_[k].next].kind == step::kind_t::cpu)
        ++computing_on_[static_cast<size_t>(
          plan_.hosts[static_cast<size_t>(plan_.actors[k].host)].machine)];
    count_sending();
    double next = arrivals_.empty() ? never : arrivals_.top().at;
    for (size_t k = 0; k < wire_.size(); ++k)
      if (sending_now(k))
        next = std::min(next, now_ + wire_[k].remaining / rate_of(wire_[k]));
    for (size_t k = 0; k < actors_.size(); ++k)
      if (!actors_[k].done() && actors_[k].steps[actors_[k].next].kind == step::kind_t::cpu)
        next = std::min(next, now_ + actors_[k].remaining / rate_of(k));
    if (next == never)
      deadlock();
    account(next - now_);
    refill(next - now_);
    for (size_t k = 0; k < wire_.size(); ++k) {
      if (!sending_now(k))
        continue;
      transfer& t = wire_[k];
      const double rate = rate_of(t);
      t.remaining = now_ + t.remaining / rate <= next ? 0.0 : t.remaining - (next - now_) * rate;
    }
    now_ = next;
    // Sent: arrives a latency later.
    for (size_t k = 0; k < wire_.size();) {
      if (wire_[k].remaining > 0) {
        ++k;
        continue;
      }
      deliver(wire_[k].on, now_ + plan_.link.latency, wire_[k].bytes);
      wire_.erase(wire_.begin() + static_cast<long>(k));
    }
    while (!arrivals_.empty() && arrivals_.top().at <= now_) {
      arrived_[arrivals_.top().on].push_back(arrivals_.top().bytes);
      arrivals_.pop();
    }
  }
  simulation out;
  out.steps = actors_.front().marks;
  out.end_seconds = now_;
  const auto end_of = [&](int32_t mark) {
    double end = 0;
    for (const auto& a : actors_)
      end = std::max(end, a.mark_times[static_cast<size_t>(mark - 1)]);
    return end;
  };
  const int32_t measured = out.steps - plan_.warmup_steps;
  const double start = plan_.warmup_steps > 0 ? end_of(plan_.warmup_steps) : 0.0;
  out.step_seconds = (end_of(out.steps) - start) / measured;
  out.wire_bytes = wire_bytes_ / measured;
  int32_t reported = 0;
  for (size_t k = 0; k < actors_.size(); ++k) {
    if (!plan_.actors[k].reported)
      continue;
    ++reported;
    const auto& a = actors_[k];
    out.compute_seconds += a.kinds[0] / measured;
    out.communication_seconds += a.kinds[1] / measured;
    out.waiting_seconds += a.kinds[2] / measured;
  }
  if (reported > 0) {
    out.compute_seconds /= reported;
    out.communication_seconds /= reported;
    out.waiting_seconds /= reported;
  }
  // An actor's own steps may end before the slowest's: the rest is waiting.
  out.waiting_seconds = std::max(out.waiting_seconds, out.step_seconds - out.compute_seconds -
                                                        out.communication_seconds);
  return out;
}

void check(const simulated_plan& p) {
  expect(!p.actors.empty(), "at least one actor");
  expect(!p.machine_cores.empty(), "at least one machine");
  for (int32_t c : p.machine_cores)
    expect(c >= 1, "machines of at least one core");
  for (const auto& h : p.hosts)
    expect(h.machine >= 0 && static_cast<size_t>(h.machine) < p.machine_cores.size(),
            "a host on a machine of the plan");
  expect(p.link.bandwidth > 0, "bandwidth > 0 bytes/s");
  expect(p.link.burst >= 0, "a link burst >= 0 bytes");
  expect(p.link.shared_efficiency > 0 && p.link.shared_efficiency <= 1,
         "a link's shared_efficiency in (0, 1]");
  expect(p.warmup_steps >= 0, "warmup_steps >= 0");
  int32_t steps = -1;
  for (const auto& a : p.actors) {
    expect(a.host >= 0 && static_cast<size_t>(a.host) < p.hosts.size(),
            "actor " + a.name + " on a host of the plan");
    int32_t ends = 0;
    for (const auto& o : a.program) {
      if (o.kind == operation::kind_t::step_end)
        ++ends;
      if (o.kind == operation::kind_t::send || o.kind == operation::kind_t::receive)
        expect(o.peer >= 0 && static_cast<size_t>(o.peer) < p.actors.size(),
                "actor " + a.name + "'s peers among the plan's actors");
      expect(o.seconds >= 0 && o.bytes >= 0 && o.window >= 0,
              "actor " + a.name + "'s seconds, bytes and windows >= 0");
    }
    expect(steps < 0 || ends == steps, "the same number of step_ends in every actor");
    steps = ends;
  }
  expect(steps > p.warmup_steps, "more steps than warmup_steps (" +
                                    std::to_string(p.warmup_steps) + "), got " +
                                    std::to_string(steps));
}

} // namespace

simulation simulate(const simulated_plan& p) {
  check(p);
  return engine(p).run();
}

} // namespace baton::model::cost
