#include "model/cost/simulated_plans.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/core/error.hpp"
#include "model/cost/overloaded.hpp"

namespace baton::model::cost {

namespace {

/// Steps simulated after the warm-up: enough for a steady state, few enough
/// for a projection to 64 hosts to stay quick.
constexpr int32_t measured_steps = 3;

/// A plan being written: actors added in order, their programs appended.
struct plan_writer {
  simulated_plan plan;

  int32_t add(std::string name, int32_t host, bool reported) {
    plan.actors.push_back({std::move(name), host, reported, {}});
    return static_cast<int32_t>(plan.actors.size() - 1);
  }
  std::vector<operation>& of(int32_t actor) {
    return plan.actors[static_cast<size_t>(actor)].program;
  }
  void compute(int32_t actor, double seconds, time_kind as = time_kind::compute) {
    if (seconds > 0)
      of(actor).push_back(operation::compute(seconds, as));
  }
  void send(int32_t from, int32_t to, double bytes, int32_t window = 0) {
    of(from).push_back(operation::send(to, bytes, window));
  }
  void receive(int32_t at, int32_t from, time_kind as = time_kind::communication) {
    of(at).push_back(operation::receive(from, as));
  }
  void step_end(int32_t actor) { of(actor).push_back(operation::step_end()); }
};

/// The hosts of `c` (see simulated_plan_of); the machines' cores are set
/// once the actors are placed (finish).
plan_writer writer_for(const cluster& c, const runtime_costs& runtime) {
  plan_writer out;
  out.plan.link = c.link;
  out.plan.runtime = runtime;
  out.plan.hosts.clear();
  out.plan.machine_cores.clear();
  const bool shared = c.shared_cores > 0;
  if (shared)
    out.plan.machine_cores.push_back(c.shared_cores);
  for (int32_t h = 0; h < c.hosts; ++h) {
    out.plan.hosts.push_back({shared ? 0 : h});
    if (!shared)
      out.plan.machine_cores.push_back(1);
  }
  return out;
}

/// A host of its own has a core per actor on it (compute_threads: 1).
simulated_plan finish(plan_writer w, const cluster& c, int32_t warmup, int32_t cooldown = 0) {
  if (c.shared_cores <= 0) {
    std::vector<int32_t> actors(w.plan.hosts.size(), 0);
    for (const auto& a : w.plan.actors)
      ++actors[static_cast<size_t>(a.host)];
    for (size_t h = 0; h < actors.size(); ++h)
      w.plan.machine_cores[h] = std::max(1, actors[h]);
  }
  w.plan.warmup_steps = warmup;
  w.plan.cooldown_steps = cooldown;
  return std::move(w.plan);
}

/// A ring all-reduce of `bytes` among `ring` (actor indices, in ring
/// order): 2 (W - 1) rounds, each a chunk of bytes / W to the successor
/// and one from the predecessor (ring_exchange.hpp's schedule); two
/// workers send both halves, then receive both.
void ring_rounds(plan_writer& out, const std::vector<int32_t>& ring, double bytes) {
  const auto n = static_cast<int32_t>(ring.size());
  for (int32_t k = 0; k < n; ++k) {
    const int32_t self = ring[static_cast<size_t>(k)];
    const int32_t next = ring[static_cast<size_t>((k + 1) % n)];
    const int32_t previous = ring[static_cast<size_t>((k + n - 1) % n)];
    if (n == 2) {
      out.send(self, next, bytes / 2);
      out.send(self, next, bytes / 2);
      out.receive(self, previous);
      out.receive(self, previous);
      continue;
    }
    for (int32_t round = 0; round < 2 * (n - 1); ++round) {
      out.send(self, next, bytes / n);
      out.receive(self, previous);
    }
  }
}

// -- one plan per strategy -----------------------------------------------------------------

simulated_plan local_plan(const workload& w, const cluster& c, const local_strategy& s,
                          const runtime_costs& rt) {
  plan_writer out = writer_for(cluster{1, c.link, c.shared_cores}, rt);
  const int32_t a = out.add("local", 0, true);
  const double step = local_step_seconds(w, s);
  for (int32_t k = 0; k < 1 + measured_steps; ++k) {
    out.compute(a, step);
    out.step_end(a);
  }
  return finish(std::move(out), cluster{1, c.link, c.shared_cores}, 1);
}

/// data-parallel's ring: worker w on host w computes its forward, then its
/// backward bucket by bucket; each bucket goes to the host's ring side (an
/// actor of its own here, so that the all-reduce overlaps the backward as
/// the worker's puts let it) as soon as the backward has produced it (with
/// overlap; after the whole backward without), then 2 (W - 1) rounds over
/// the ring; the worker steps when every bucket is back.
simulated_plan ring_plan(const workload& w, const cluster& c, const ring_strategy& s,
                         const runtime_costs& rt) {
  plan_writer out = writer_for(c, rt);
  const step_compute cost = compute_of(w, static_cast<double>(w.batch_size), s.freeze);
  const auto buckets = gradient_buckets(w.layers, s.freeze.frozen_layers, s.bucket_mb);
  std::vector<int32_t> workers, sides;
  for (int32_t h = 0; h < c.hosts; ++h)
    workers.push_back(out.add("worker" + std::to_string(h), h, true));
  for (int32_t h = 0; h < c.hosts; ++h)
    sides.push_back(out.add("ring" + std::to_string(h), h, false));
  for (int32_t k = 0; k < 1 + measured_steps; ++k) {
    for (int32_t h = 0; h < c.hosts; ++h) {
      const int32_t worker = workers[static_cast<size_t>(h)];
      const int32_t side = sides[static_cast<size_t>(h)];
      out.compute(worker, cost.forward);
      // The backward from the last layer down, cut where each bucket is ready.
      size_t layer = w.layers.size();
      for (const bucket& b : buckets) {
        double seconds = 0;
        for (; layer > b.first_layer; --layer)
          seconds += cost.backward_of[layer - 1];
        out.compute(worker, seconds);
        if (s.overlap)
          out.send(worker, side, 0);
      }
      double rest = 0;
      for (; layer > 0; --layer)
        rest += cost.backward_of[layer - 1];
      out.compute(worker, rest);
      if (!s.overlap)
        for (size_t b = 0; b < buckets.size(); ++b)
          out.send(worker, side, 0);
      if (!buckets.empty())
        out.receive(worker, side);
      out.compute(worker, cost.update);
    }
    for (const bucket& b : buckets) {
      for (int32_t h = 0; h < c.hosts; ++h)
        out.receive(sides[static_cast<size_t>(h)], workers[static_cast<size_t>(h)],
                    time_kind::waiting);
      ring_rounds(out, sides, b.bytes);
    }
    for (int32_t h = 0; h < c.hosts; ++h) {
      if (!buckets.empty())
        out.send(sides[static_cast<size_t>(h)], workers[static_cast<size_t>(h)], 0);
      out.step_end(workers[static_cast<size_t>(h)]);
      out.step_end(sides[static_cast<size_t>(h)]);
    }
  }
  return finish(std::move(out), c, 1);
}


/// data-parallel's ps (BSP): worker w on host w, shard s on host s % W
/// (data_parallel/plan.cpp's shard_nodes with --local-nodes). A worker
/// computes its forward and backward, pushes G / S to every shard and pulls
/// G / S from every shard; a shard sums every worker's push, steps its
/// share of the parameters and sends them back.
simulated_plan ps_plan(const workload& w, const cluster& c, const ps_strategy& s,
                       const runtime_costs& rt) {
  const int32_t shards = s.shards == 0 ? c.hosts : s.shards;
  if (shards < 1)
    throw error("cost model: expected ps shards >= 1, got " + std::to_string(s.shards));
  plan_writer out = writer_for(c, rt);
  const step_compute cost = compute_of(w, static_cast<double>(w.batch_size), s.freeze);
  const double slice = cost.gradient_bytes / shards;
  std::vector<int32_t> workers, servers;
  for (int32_t h = 0; h < c.hosts; ++h)
    workers.push_back(out.add("worker" + std::to_string(h), h, true));
  for (int32_t k = 0; k < shards; ++k)
    servers.push_back(out.add("shard" + std::to_string(k), k % c.hosts, false));
  // The runtime hands all of an actor's messages of a step to its
  // connections at once and the kernel sends them side by side; in the
  // plan one goes after the other, so each starts at a different peer
  // (worker h at shard h + 1, shard k at worker k + 1): all starting at the
  // first peer would queue every first message on one host's link.
  const auto nth = [](const std::vector<int32_t>& peers, size_t from, size_t k) {
    return peers[(from + 1 + k) % peers.size()];
  };
  for (int32_t step = 0; step < 1 + measured_steps; ++step) {
    for (size_t h = 0; h < workers.size(); ++h) {
      const int32_t worker = workers[h];
      out.compute(worker, cost.forward + cost.backward);
      for (size_t k = 0; k < servers.size(); ++k)
        out.send(worker, nth(servers, h, k), slice);
      for (int32_t server : servers)
        out.receive(worker, server);
      out.step_end(worker);
    }
    for (size_t k = 0; k < servers.size(); ++k) {
      const int32_t server = servers[k];
      for (int32_t worker : workers)
        out.receive(server, worker, time_kind::waiting);
      out.compute(server, cost.update / shards);
      for (size_t h = 0; h < workers.size(); ++h)
        out.send(server, nth(workers, k, h), slice);
      out.step_end(server);
    }
  }
  return finish(std::move(out), c, 1);
}

/// Local SGD: every worker steps on its own gradients; after every L-th
/// step its trainable weights are averaged over the ring, bucket after
/// bucket (no overlap). L warm-up steps, then 2 L measured.
simulated_plan local_sgd_plan(const workload& w, const cluster& c, const local_sgd_strategy& s,
                              const runtime_costs& rt) {
  if (s.sync_every < 1)
    throw error("cost model: expected sync_every >= 1, got " + std::to_string(s.sync_every));
  plan_writer out = writer_for(c, rt);
  const step_compute cost = compute_of(w, static_cast<double>(w.batch_size), s.freeze);
  const auto buckets = gradient_buckets(w.layers, s.freeze.frozen_layers, s.bucket_mb);
  std::vector<int32_t> workers;
  for (int32_t h = 0; h < c.hosts; ++h)
    workers.push_back(out.add("worker" + std::to_string(h), h, true));
  const int32_t steps = 3 * s.sync_every;
  for (int32_t step = 0; step < steps; ++step) {
    for (int32_t worker : workers)
      out.compute(worker, cost.forward + cost.backward + cost.update);
    if ((step + 1) % s.sync_every == 0)
      for (const bucket& b : buckets)
        ring_rounds(out, workers, b.bytes);
    for (int32_t worker : workers)
      out.step_end(worker);
  }
  return finish(std::move(out), c, s.sync_every);
}

/// IST: worker w on host w, shard s on host s % W. Each round a worker
/// takes its subnet's slice from every shard (f P / S), assembles its
/// subnet, trains L local steps on it (ist_worker_step_seconds each), cuts
/// it and sends the slices back; a shard makes the round's partition, takes
/// each worker's pieces before it sends them and writes each worker's back
/// as they come (ist_round_of: the runtime's own work of a round, when
/// timed). One round of warm-up, two measured.
simulated_plan ist_plan(const workload& w, const cluster& c, const ist_strategy& s,
                        const runtime_costs& rt) {
  const int32_t shards = s.shards == 0 ? c.hosts : s.shards;
  if (shards < 1 || s.local_steps < 1)
    throw error("cost model: expected ist shards >= 1 and local_steps >= 1");
  plan_writer out = writer_for(c, rt);
  const double fraction = ist_subnet_fraction_of(s, c.hosts);
  const step_compute whole = compute_of(w, static_cast<double>(w.batch_size), freezing{});
  const double slice = whole.gradient_bytes * fraction / shards;
  const double step_seconds = ist_worker_step_seconds(w, s, c.hosts);
  const ist_round_seconds own = ist_round_of(s, c.hosts, shards);
  std::vector<int32_t> workers, servers;
  for (int32_t h = 0; h < c.hosts; ++h)
    workers.push_back(out.add("worker" + std::to_string(h), h, true));
  for (int32_t k = 0; k < shards; ++k)
    servers.push_back(out.add("shard" + std::to_string(k), k % c.hosts, false));
  for (int32_t round = 0; round < 3; ++round) {
    for (int32_t worker : workers) {
      for (int32_t server : servers)
        out.receive(worker, server);
      out.compute(worker, own.assemble);
      for (int32_t step = 0; step < s.local_steps; ++step) {
        out.compute(worker, step_seconds);
        if (step + 1 == s.local_steps) {
          out.compute(worker, own.split);
          for (int32_t server : servers)
            out.send(worker, server, slice);
        }
        out.step_end(worker);
      }
    }
    for (int32_t server : servers) {
      out.compute(server, own.partition);
      for (int32_t worker : workers) {
        out.compute(server, own.take);
        out.send(server, worker, slice);
      }
      for (int32_t worker : workers) {
        out.receive(server, worker, time_kind::waiting);
        out.compute(server, own.put);
      }
      for (int32_t step = 0; step < s.local_steps; ++step)
        out.step_end(server);
    }
  }
  return finish(std::move(out), c, s.local_steps);
}

// -- pipeline -----------------------------------------------------------------------------

/// Per microbatch, what stage s costs and sends.
struct stage_costs {
  double forward = 0, backward = 0, update = 0, parameter_bytes = 0;
  double activation_bytes = 0; ///< what it sends forward: its last layer's output (0 for the last stage)
  double gradient_bytes = 0;   ///< what the next stage sends back: activation_bytes' gradient
  /// weight_gradient: next — the weight half of the previous stage's last
  /// layer that this stage computes after sending the input gradient, and
  /// the weight gradients it sends back after it; whether this stage's
  /// step waits for the next stage's.
  double weight_half = 0;
  double weight_half_bytes = 0;
  bool hands_on = false;
  int32_t replicas = 1;
  int32_t first_actor = 0;     ///< replica j is actor first_actor + j
  int32_t replica_of(int64_t microbatch) const {
    return first_actor + static_cast<int32_t>(microbatch % replicas);
  }
};

std::vector<stage_costs> stages_of(const workload& w, const cluster& c,
                                   const pipeline_strategy& s) {
  const auto ends = pipeline_stage_ends_of(w, c, s);
  const double scale =
    scale_of(w, static_cast<double>(w.batch_size) / std::max(1, s.microbatches));
  std::vector<stage_costs> out;
  size_t begin = 0;
  int32_t actor = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    stage_costs st;
    for (size_t l = begin; l < ends[k]; ++l) {
      st.forward += w.layers[l].forward_seconds * scale;
      st.backward += w.layers[l].backward_seconds * scale;
      st.update += w.layers[l].update_seconds;
      st.parameter_bytes += w.layers[l].parameter_bytes;
    }
    if (k + 1 < ends.size()) {
      st.activation_bytes = w.layers[ends[k] - 1].activation_bytes * scale;
      st.gradient_bytes = st.activation_bytes;
    }
    st.replicas = s.stage_ends.empty() || s.replicas.empty() ? 1 : s.replicas[k];
    st.first_actor = actor;
    actor += st.replicas;
    out.push_back(st);
    begin = ends[k];
  }
  // weight_gradient: next: the weight half of a stage's last layer's backward
  // runs on the next stage after it sent the input gradient back, the
  // layer's input crosses with the output, the weight gradients come back in
  // a message of their own.
  for (const auto& h : handed_on_halves(w, ends, s.weight_gradient_next, scale)) {
    out[h.stage].backward -= h.seconds;
    out[h.stage].hands_on = true;
    out[h.stage].activation_bytes += h.input_bytes;
    out[h.stage + 1].weight_half = h.seconds;
    out[h.stage + 1].weight_half_bytes = h.gradient_bytes;
  }
  return out;
}

/// A replica group's exchange of gradient sums once per minibatch: its
/// parameters to every other replica, theirs from every other.
void group_exchange(plan_writer& out, const stage_costs& st, int32_t self) {
  for (int32_t q = 0; q < st.replicas; ++q)
    if (st.first_actor + q != self)
      out.send(self, st.first_actor + q, st.parameter_bytes);
  for (int32_t q = 0; q < st.replicas; ++q)
    if (st.first_actor + q != self)
      out.receive(self, st.first_actor + q);
}

/// The forward of microbatch m on stage k's replica `self`: the activation
/// from the stage before (the bubble is waiting), compute, on to the next.
void forward_of(plan_writer& out, const std::vector<stage_costs>& st, size_t k, int32_t self,
                int64_t m) {
  if (k > 0)
    out.receive(self, st[k - 1].replica_of(m), time_kind::waiting);
  out.compute(self, st[k].forward);
  if (k + 1 < st.size())
    out.send(self, st[k + 1].replica_of(m), st[k].activation_bytes);
}

/// The backward of microbatch m: the gradient from the stage after, compute,
/// the input's gradient to the stage before (weight_gradient: next: then
/// the previous stage's weight half, sent after it; and the next stage's
/// weight half received before what follows the backward).
void backward_of(plan_writer& out, const std::vector<stage_costs>& st, size_t k, int32_t self,
                 int64_t m) {
  if (k + 1 < st.size())
    out.receive(self, st[k + 1].replica_of(m), time_kind::waiting);
  out.compute(self, st[k].backward);
  if (k > 0) {
    out.send(self, st[k - 1].replica_of(m), st[k - 1].gradient_bytes);
    if (st[k - 1].hands_on) {
      out.compute(self, st[k].weight_half);
      out.send(self, st[k - 1].replica_of(m), st[k].weight_half_bytes);
    }
  }
  if (st[k].hands_on)
    out.receive(self, st[k + 1].replica_of(m), time_kind::waiting);
}

/// The pipeline's stages, one replica per host in stage order, in the
/// schedule's static order (pipeline/stage.cpp): gpipe every forward of a
/// minibatch then every backward (the last stage each microbatch's forward
/// and backward in one go), a flush and one step per minibatch;
/// 1f1b (PipeDream's order) stage k runs the forward of microbatch m' before
/// the backward of m when m' <= m + S - k - 1 (S - k - 1 warm-up forwards,
/// then one forward one backward), with a flush and one step per minibatch
/// under 1f1b-flush, without a flush and a step per microbatch under 1f1b.
/// A replica takes every r-th microbatch.
simulated_plan pipeline_plan(const workload& w, const cluster& c, const pipeline_strategy& s,
                             const runtime_costs& rt) {
  if (s.microbatches < 1)
    throw error("cost model: expected microbatches >= 1, got " + std::to_string(s.microbatches));
  const auto st = stages_of(w, c, s);
  int32_t hosts = 0;
  for (const auto& x : st)
    hosts += x.replicas;
  const cluster used{hosts, c.link, c.shared_cores};
  plan_writer out = writer_for(used, rt);
  for (size_t k = 0; k < st.size(); ++k)
    for (int32_t j = 0; j < st[k].replicas; ++j)
      out.add("stage" + std::to_string(k) + "." + std::to_string(j), st[k].first_actor + j, true);
  const auto stages = static_cast<int64_t>(st.size());
  const bool flush = s.schedule != pipeline_schedule::one_f_one_b;
  // 1f1b fills once: enough steps that the fill is a small part of the warm-up;
  // and drains once, as many steps at the end, left out too (its first stages ran
  // the last microbatches' forwards ahead: the last steps hold less work).
  const int32_t warmup =
    flush ? 1 : static_cast<int32_t>((2 * stages + s.microbatches - 1) / s.microbatches);
  const int32_t cooldown = flush ? 0 : warmup;
  const int32_t steps = warmup + measured_steps + cooldown;
  const int64_t m_total = static_cast<int64_t>(steps) * s.microbatches;
  for (size_t k = 0; k < st.size(); ++k)
    for (int32_t j = 0; j < st[k].replicas; ++j) {
      const int32_t self = st[k].first_actor + j;
      const int64_t ahead = stages - static_cast<int64_t>(k) - 1;
      // The microbatches of one flush: a minibatch, or the whole run under 1f1b.
      const int64_t span = flush ? s.microbatches : m_total;
      for (int64_t first = 0; first < m_total; first += span) {
        int64_t forwarded = first;
        for (int64_t m = first; m < first + span; ++m) {
          if (m % st[k].replicas != j)
            continue;
          // The last stage takes a microbatch's forward, loss and backward in
          // one go under every schedule (pipeline/stage.cpp's last_stage):
          // its gradient goes back while the next activations come in.
          const bool last = k + 1 == st.size();
          const int64_t forwards_before = s.schedule == pipeline_schedule::gpipe && !last
                                            ? first + span - 1
                                            : std::min(first + span - 1, m + ahead);
          for (; forwarded <= forwards_before; ++forwarded)
            if (forwarded % st[k].replicas == j)
              forward_of(out, st, k, self, forwarded);
          backward_of(out, st, k, self, m);
          if (!flush)
            out.compute(self, st[k].update);
          // The last of this replica's microbatches of a minibatch ends its step.
          const int64_t minibatch_end = (m / s.microbatches + 1) * s.microbatches;
          if (m + st[k].replicas >= minibatch_end) {
            if (st[k].replicas > 1)
              group_exchange(out, st[k], self);
            if (flush)
              out.compute(self, st[k].update);
            out.step_end(self);
          }
        }
      }
    }
  return finish(std::move(out), used, warmup, cooldown);
}

} // namespace

simulated_plan simulated_plan_of(const workload& w, const cluster& c, const strategy& s,
                                 const runtime_costs& runtime) {
  return std::visit(
    overloaded{[&](const local_strategy& x) { return local_plan(w, c, x, runtime); },
               [&](const ring_strategy& x) { return ring_plan(w, c, x, runtime); },
               [&](const ps_strategy& x) { return ps_plan(w, c, x, runtime); },
               [&](const local_sgd_strategy& x) { return local_sgd_plan(w, c, x, runtime); },
               [&](const pipeline_strategy& x) { return pipeline_plan(w, c, x, runtime); },
               [&](const ist_strategy& x) { return ist_plan(w, c, x, runtime); }},
    s);
}

prediction simulate_prediction(const workload& w, const cluster& c, const strategy& s,
                               const runtime_costs& runtime) {
  prediction p = predict(w, c, s); // checks the inputs; the epoch and the evaluation
  if (c.hosts == 1 && !std::holds_alternative<local_strategy>(s) &&
      !std::holds_alternative<pipeline_strategy>(s))
    return p; // one host exchanges nothing: as the formula
  const simulation sim = simulate(simulated_plan_of(w, c, s, runtime));
  p.compute_seconds = sim.compute_seconds;
  p.communication_seconds = sim.communication_seconds;
  p.waiting_seconds = sim.waiting_seconds;
  p.wire_bytes = sim.wire_bytes;
  p.step_seconds = sim.step_seconds + p.evaluation_seconds;
  return p;
}

} // namespace baton::model::cost
