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
/// Runs of a plan at most (simulate), and the share of a step within
/// which two runs agree.
constexpr int32_t max_bucket_rounds = 8;
constexpr double bucket_tolerance = 0.02;

void expect(bool ok, const std::string& what) {
  if (!ok)
    throw error("simulator: expected " + what);
}

/// The steps of an actor's program: its step_ends.
int32_t step_ends_of(const std::vector<operation>& program) {
  return static_cast<int32_t>(
    std::count_if(program.begin(), program.end(),
                  [](const operation& o) { return o.kind == operation::kind_t::step_end; }));
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
  int32_t edge = -1;   ///< post, wait: the edge's index (engine::edges_)
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

/// Each host's token buckets (link_model::burst), out and in, by host.
struct buckets {
  std::vector<double> out, in;
};

/// The state of the whole simulation.
class engine {
public:
  engine(const simulated_plan& p, const buckets& start) : plan_(p) {
    for (const auto& a : p.actors) {
      running r;
      r.steps = expand(a);
      actors_.push_back(std::move(r));
    }
    sending_.assign(p.hosts.size(), 0);
    receiving_.assign(p.hosts.size(), 0);
    connections_.resize(p.hosts.size() * p.hosts.size());
    out_of_.resize(p.hosts.size());
    into_.resize(p.hosts.size());
    tokens_out_ = start.out;
    tokens_in_ = start.in;
    io_on_.assign(p.machine_cores.size(), 0);
    steps_ = step_ends_of(p.actors.front().program);
  }

  simulation run();
  /// What the buckets hold when the run ended.
  buckets left() const { return {tokens_out_, tokens_in_}; }

private:
  /// An edge (from, to) as it runs, found by the index its steps carry.
  struct edge {
    std::deque<double> arrived; ///< delivered, not yet received: their bytes
    int32_t in_flight = 0;      ///< posted, not yet received
    double last_arrival = 0;    ///< a connection delivers in order
  };
  struct arrival {
    double at;
    int32_t on; ///< the edge
    double bytes;
    bool operator>(const arrival& o) const { return at > o.at; }
  };

  bool cross_host(int32_t from, int32_t to) const {
    return plan_.actors[static_cast<size_t>(from)].host != plan_.actors[static_cast<size_t>(to)].host;
  }

  std::vector<step> expand(const simulated_actor& a);
  /// The index of edge (from, to) in edges_, added on first use.
  int32_t edge_of(int32_t from, int32_t to);
  bool advance(size_t index);
  double rate_of(size_t index) const;
  double machine_rate(size_t machine) const;
  size_t machine_of(int32_t actor) const {
    const auto host = static_cast<size_t>(plan_.actors[static_cast<size_t>(actor)].host);
    return static_cast<size_t>(plan_.hosts[host].machine);
  }
  void account(double dt);
  [[noreturn]] void deadlock() const;

  const simulated_plan& plan_;
  std::vector<running> actors_;
  std::vector<edge> edges_;
  std::map<std::pair<int32_t, int32_t>, int32_t> edge_index_; ///< (from, to) -> edges_
  std::priority_queue<arrival, std::vector<arrival>, std::greater<>> arrivals_;
  /// A message on the wire: its bytes not yet sent.
  struct transfer {
    int32_t on; ///< the edge
    double bytes, remaining;
  };
  /// Each pair of hosts has one connection each way (the nodes' TCP
  /// connection), which sends its messages in order: the first on a
  /// connection is sent, the others wait behind it; the connections sending
  /// at once share the hosts' links fairly. A connection's rate changes
  /// only when a connection of one of its hosts starts or stops sending:
  /// then its front's remaining bytes are settled and its end computed
  /// again, so that an event costs the connections of the hosts it touches
  /// and a scan of the sending connections' ends (a flat array; a heap of
  /// ends, pushed at every change, cost as much), not a pass over every
  /// message on the wire: a 32-host parameter server's plan (1,024
  /// connections sending at once) 7 s -> 0.05 s, 64 hosts' over 9 min -> about 0.6 s.
  struct connection {
    size_t from_host = 0, to_host = 0;
    std::deque<transfer> queue; ///< in the order they were posted; the front is sent
    double rate = 0;            ///< of the front, since `settled`
    double settled = 0;         ///< when the front's remaining was last brought up to date
    size_t slot = 0;            ///< its place in busy_ and ends_ while it sends
  };
  std::vector<connection> connections_;            ///< by from_host x hosts + to_host
  std::vector<std::vector<size_t>> out_of_, into_; ///< per host, its sending connections
  std::vector<size_t> busy_;  ///< the connections sending now
  std::vector<double> ends_;  ///< when each of busy_ ends its front at its rate
  std::vector<int32_t> sending_, receiving_; ///< connections sending now, per host and direction
  void post(int32_t e, size_t from, size_t to, double bytes, double remaining) {
    const size_t index = from * sending_.size() + to;
    connection& c = connections_[index];
    c.queue.push_back({e, bytes, remaining});
    if (c.queue.size() > 1)
      return; // behind the one being sent
    c.from_host = from;
    c.to_host = to;
    c.settled = now_;
    c.rate = 0; // to be rated
    c.slot = busy_.size();
    busy_.push_back(index);
    ends_.push_back(never);
    ++sending_[from];
    ++receiving_[to];
    out_of_[from].push_back(index);
    into_[to].push_back(index);
    rerate(from, to);
  }
  /// `index` sent its front: the next message goes, or it stops sending.
  void sent(size_t index) {
    connection& c = connections_[index];
    c.queue.pop_front();
    if (!c.queue.empty()) {
      c.settled = now_;
      ends_[c.slot] = now_ + c.queue.front().remaining / c.rate;
      return;
    }
    // Out of busy_: the last sending connection takes its slot.
    connections_[busy_.back()].slot = c.slot;
    busy_[c.slot] = busy_.back();
    ends_[c.slot] = ends_.back();
    busy_.pop_back();
    ends_.pop_back();
    --sending_[c.from_host];
    --receiving_[c.to_host];
    const auto drop = [index](std::vector<size_t>& list) {
      list.erase(std::find(list.begin(), list.end(), index));
    };
    drop(out_of_[c.from_host]);
    drop(into_[c.to_host]);
    rerate(c.from_host, c.to_host);
  }
  /// Settles every connection of hosts `from` (sending) and `to`
  /// (receiving) whose rate moved, and computes its end again.
  void rerate(size_t from, size_t to) {
    const auto again = [this](size_t index) {
      connection& c = connections_[index];
      const double rate = rate_of(c);
      if (rate == c.rate)
        return; // its end holds
      transfer& t = c.queue.front();
      t.remaining = std::max(0.0, t.remaining - (now_ - c.settled) * c.rate);
      c.settled = now_;
      c.rate = rate;
      ends_[c.slot] = now_ + t.remaining / rate;
    };
    for (size_t h : {from, to}) {
      for (size_t index : out_of_[h])
        again(index);
      for (size_t index : into_[h])
        again(index);
    }
  }
  /// The first end of a sending connection's front.
  double next_end() const {
    return ends_.empty() ? never : *std::min_element(ends_.begin(), ends_.end());
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
  double rate_of(const connection& c) const {
    const int32_t sharing = std::max(sending_[c.from_host], receiving_[c.to_host]);
    return plan_.link.bandwidth / sharing *
           (sharing >= 2 ? plan_.link.shared_efficiency : 1.0);
  }
  void deliver(int32_t e, double at, double bytes) {
    double& last = edges_[static_cast<size_t>(e)].last_arrival;
    at = std::max(at, last);
    last = at;
    arrivals_.push({at, e, bytes});
  }
  std::vector<int32_t> computing_on_; ///< per machine, this instant (its I/O counts as one)
  /// Per machine: CPU seconds of messages' I/O left to run (io_byte_seconds),
  /// one more computation on its cores while there is any.
  std::vector<double> io_on_;
  int32_t steps_ = 0; ///< step_ends per actor (check: the same in every one)
  double now_ = 0;
  double wire_bytes_ = 0; ///< sent between hosts over the whole run
};

int32_t engine::edge_of(int32_t from, int32_t to) {
  auto [at, added] = edge_index_.try_emplace({from, to}, static_cast<int32_t>(edges_.size()));
  if (added)
    edges_.emplace_back();
  return at->second;
}

std::vector<step> engine::expand(const simulated_actor& a) {
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
        cpu += plan_.link.message_overhead + rt.remote_message_seconds +
               rt.byte_seconds * o.bytes;
      out.push_back({step::kind_t::cpu, cpu, 0, -1, 0, time_kind::communication});
      out.push_back({step::kind_t::post, 0, o.bytes, o.peer, o.window, time_kind::communication,
                     edge_of(self, o.peer)});
      break;
    }
    case operation::kind_t::receive:
      out.push_back({step::kind_t::wait, 0, 0, o.peer, 0, o.as, edge_of(o.peer, self)});
      // + a message between hosts' share, added when the message is taken.
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
      const int32_t e = s.edge;
      edge& on = edges_[static_cast<size_t>(e)];
      if (s.window > 0 && on.in_flight >= s.window)
        return moved;
      ++on.in_flight;
      if (cross_host(self, s.peer)) {
        // On the wire: the host's link each way is shared by its transfers.
        const auto from = static_cast<size_t>(plan_.actors[index].host);
        const auto to = static_cast<size_t>(plan_.actors[static_cast<size_t>(s.peer)].host);
        wire_bytes_ += s.bytes;
        // Both ends' I/O, run beside the actors (the receiver's while the bytes come in).
        io_on_[machine_of(self)] += plan_.runtime.io_byte_seconds * s.bytes;
        io_on_[machine_of(s.peer)] += plan_.runtime.io_byte_seconds * s.bytes;
        // What both ends' buckets hold passes at once; the rest at the rate.
        const double credit = std::min({s.bytes, tokens_out_[from], tokens_in_[to]});
        tokens_out_[from] -= credit;
        tokens_in_[to] -= credit;
        if (s.bytes > credit) {
          post(e, from, to, s.bytes, s.bytes - credit);
        } else {
          deliver(e, now_ + plan_.link.latency, s.bytes);
        }
      } else {
        deliver(e, now_, s.bytes);
      }
    } else if (s.kind == step::kind_t::wait) {
      edge& on = edges_[static_cast<size_t>(s.edge)];
      if (on.arrived.empty())
        return moved;
      const double bytes = on.arrived.front();
      on.arrived.pop_front();
      --on.in_flight;
      // The receiver's cpu step that follows pays a message between hosts.
      if (cross_host(s.peer, self))
        a.steps[a.next + 1].seconds +=
          plan_.runtime.remote_message_seconds + plan_.runtime.byte_seconds * bytes;
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
  return machine_rate(machine_of(static_cast<int32_t>(index)));
}

/// The share of a core each computation on `machine` gets (rate_of).
double engine::machine_rate(size_t machine) const {
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
    if (a.marks >= plan_.warmup_steps && a.marks < steps_ - plan_.cooldown_steps)
      a.kinds[static_cast<int>(kind)] += dt;
  }
  for (size_t m = 0; m < io_on_.size(); ++m)
    if (io_on_[m] > epsilon)
      io_on_[m] = io_on_[m] <= dt * machine_rate(m) ? 0.0 : io_on_[m] - dt * machine_rate(m);
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
        ++computing_on_[machine_of(static_cast<int32_t>(k))];
    for (size_t m = 0; m < io_on_.size(); ++m)
      if (io_on_[m] > epsilon)
        ++computing_on_[m];
    const double first_end = next_end();
    double next = std::min(arrivals_.empty() ? never : arrivals_.top().at, first_end);
    for (size_t k = 0; k < actors_.size(); ++k)
      if (!actors_[k].done() && actors_[k].steps[actors_[k].next].kind == step::kind_t::cpu)
        next = std::min(next, now_ + actors_[k].remaining / rate_of(k));
    for (size_t m = 0; m < io_on_.size(); ++m)
      if (io_on_[m] > epsilon)
        next = std::min(next, now_ + io_on_[m] / machine_rate(m));
    if (next == never)
      deadlock();
    account(next - now_);
    refill(next - now_);
    now_ = next;
    // Sent: arrives a latency later; the connection's next message is sent.
    for (std::vector<size_t> done; first_end <= now_;) {
      done.clear();
      for (size_t k = 0; k < busy_.size(); ++k)
        if (ends_[k] <= now_)
          done.push_back(busy_[k]);
      if (done.empty())
        break;
      for (size_t index : done) {
        const transfer& t = connections_[index].queue.front();
        deliver(t.on, now_ + plan_.link.latency, t.bytes);
        sent(index);
      }
    }
    while (!arrivals_.empty() && arrivals_.top().at <= now_) {
      edges_[static_cast<size_t>(arrivals_.top().on)].arrived.push_back(arrivals_.top().bytes);
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
  const int32_t measured = out.steps - plan_.warmup_steps - plan_.cooldown_steps;
  const double start = plan_.warmup_steps > 0 ? end_of(plan_.warmup_steps) : 0.0;
  out.step_seconds = (end_of(out.steps - plan_.cooldown_steps) - start) / measured;
  out.wire_bytes = wire_bytes_ / out.steps;
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
  expect(p.warmup_steps >= 0 && p.cooldown_steps >= 0, "warmup_steps and cooldown_steps >= 0");
  int32_t steps = -1;
  for (const auto& a : p.actors) {
    expect(a.host >= 0 && static_cast<size_t>(a.host) < p.hosts.size(),
            "actor " + a.name + " on a host of the plan");
    const int32_t ends = step_ends_of(a.program);
    for (const auto& o : a.program) {
      if (o.kind == operation::kind_t::send || o.kind == operation::kind_t::receive)
        expect(o.peer >= 0 && static_cast<size_t>(o.peer) < p.actors.size(),
                "actor " + a.name + "'s peers among the plan's actors");
      expect(o.seconds >= 0 && o.bytes >= 0 && o.window >= 0,
              "actor " + a.name + "'s seconds, bytes and windows >= 0");
    }
    expect(steps < 0 || ends == steps, "the same number of step_ends in every actor");
    steps = ends;
  }
  expect(steps > p.warmup_steps + p.cooldown_steps,
         "more steps than warmup_steps + cooldown_steps (" +
           std::to_string(p.warmup_steps + p.cooldown_steps) + "), got " + std::to_string(steps));
}

/// Where a plan's buckets likely stand between steps: full when the
/// longest compute of an actor a step refills what a step's exchange takes
/// from them on every host and direction (a link that idles long enough),
/// else empty. Only a first guess: simulate runs the plan again from where
/// a run left them.
buckets likely_buckets(const simulated_plan& p) {
  const size_t hosts = p.hosts.size();
  std::vector<double> out(hosts, 0), in(hosts, 0);
  double compute = 0;
  for (const auto& a : p.actors) {
    double seconds = 0;
    for (const auto& o : a.program) {
      if (o.kind == operation::kind_t::compute)
        seconds += o.seconds;
      if (o.kind != operation::kind_t::send)
        continue;
      const auto to = static_cast<size_t>(p.actors[static_cast<size_t>(o.peer)].host);
      if (to == static_cast<size_t>(a.host))
        continue;
      out[static_cast<size_t>(a.host)] += o.bytes;
      in[to] += o.bytes;
    }
    compute = std::max(compute, seconds);
  }
  const auto steps = static_cast<double>(step_ends_of(p.actors.front().program));
  const double refilled = compute / steps * p.link.bandwidth;
  const auto refills = [&](double bytes) {
    return refilled >= std::min(bytes / steps, p.link.burst);
  };
  const bool full = std::all_of(out.begin(), out.end(), refills) &&
                    std::all_of(in.begin(), in.end(), refills);
  const double level = full ? p.link.burst : 0.0;
  return {std::vector<double>(hosts, level), std::vector<double>(hosts, level)};
}

} // namespace

simulation simulate(const simulated_plan& p) {
  check(p);
  const size_t hosts = p.hosts.size();
  // The steady state of the links' token buckets: a plan holds a few steps,
  // too few to drain a burst from full when a step sends more than its link
  // refills (a 1.2 MB burst, 0.2 MB short a step) or to fill one from empty
  // when the link idles. The plan runs from the likely state, then from
  // where the last run left them, until a run ends with its buckets where
  // it started them (within what would move its step by bucket_tolerance)
  // or two runs agree on the step.
  buckets start = likely_buckets(p);
  simulation out;
  for (int32_t round = 0; round < max_bucket_rounds; ++round) {
    engine run(p, start);
    const simulation next = run.run();
    const bool agree = round > 0 && std::abs(next.step_seconds - out.step_seconds) <=
                                      bucket_tolerance * out.step_seconds;
    out = next;
    if (p.link.burst <= 0 || out.wire_bytes <= 0 || agree)
      break;
    const buckets end = run.left();
    const auto measured = static_cast<double>(out.steps - p.warmup_steps - p.cooldown_steps);
    const double allowed = bucket_tolerance * out.step_seconds * measured * p.link.bandwidth;
    bool settled = true;
    for (size_t h = 0; h < hosts; ++h)
      settled = settled && std::abs(end.out[h] - start.out[h]) <= allowed &&
                std::abs(end.in[h] - start.in[h]) <= allowed;
    if (settled)
      break;
    start = end;
  }
  return out;
}

} // namespace baton::model::cost
