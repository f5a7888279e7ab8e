#include "model/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "model/core/error.hpp"
#include "model/cost/overloaded.hpp"

namespace baton::model::cost {

namespace {

constexpr double mebibyte = 1024.0 * 1024.0;

// -- checks ---------------------------------------------------------------------------

void require(bool ok, const std::string& what) {
  if (!ok)
    throw error("cost model: expected " + what);
}

void check(const workload& w, const cluster& c) {
  require(!w.layers.empty(), "a profile with at least one layer");
  require(w.profiled_batch > 0, "profiled_batch > 0, got " + std::to_string(w.profiled_batch));
  require(w.batch_size > 0, "batch_size > 0, got " + std::to_string(w.batch_size));
  require(w.samples_per_epoch >= 0, "samples_per_epoch >= 0");
  require(c.hosts >= 1, "hosts >= 1, got " + std::to_string(c.hosts));
  require(c.link.bandwidth > 0, "bandwidth > 0 bytes/s");
  require(c.link.latency >= 0 && c.link.message_overhead >= 0,
          "latency and message_overhead >= 0 seconds");
  require(c.link.burst >= 0, "a link burst >= 0 bytes");
}

void check(const workload& w, const freezing& f) {
  require(f.frozen_layers <= w.layers.size(),
          "a frozen prefix of at most " + std::to_string(w.layers.size()) + " layers, got " +
            std::to_string(f.frozen_layers));
}


int64_t ceil_steps(int64_t samples, double per_step) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(samples) / per_step));
}

/// The forward of the test samples through the whole model on one host
/// (every strategy but the pipeline: worker 0 evaluates, the others wait).
double evaluation_forward(const workload& w) {
  double forward = 0;
  for (const auto& l : w.layers)
    forward += l.forward_seconds;
  return forward * scale_of(w, static_cast<double>(w.test_samples));
}

/// `p` with its epoch: the step time adds the epoch's evaluation
/// (`evaluation`, seconds per epoch) over its steps.
prediction finish(prediction p, const workload& w, double evaluation) {
  if (p.steps_per_epoch == 0 && w.samples_per_epoch > 0)
    p.steps_per_epoch = ceil_steps(w.samples_per_epoch, p.samples_per_step);
  p.evaluation_seconds = p.steps_per_epoch > 0 ? evaluation / p.steps_per_epoch : 0.0;
  p.step_seconds =
    p.compute_seconds + p.communication_seconds + p.waiting_seconds + p.evaluation_seconds;
  return p;
}

// -- worker <-> shard exchanges (ps, IST) --------------------------------------------------

/// What host n's link carries in one direction of every worker exchanging
/// `payload` bytes with S shards (payload / S each), the shards dealt
/// round-robin over the W hosts (shard s on host s % W, each host also a
/// worker). Host n holds k_n shards: its worker's slices to the other hosts'
/// shards are payload (S - k_n) / S (out), its shards' slices from the other
/// workers k_n (W - 1) payload / S (in), on the two directions of its link.
struct host_exchange {
  double bytes = 0;    ///< max(out_n, in_n)
  double messages = 0; ///< max(S - k_n, k_n (W - 1))
};

host_exchange host_exchange_of(double payload, int32_t workers, int32_t shards, int32_t n) {
  const int32_t held = shards / workers + (n < shards % workers ? 1 : 0);
  const double out = payload * (shards - held) / shards;
  const double in = payload * held * (workers - 1) / shards;
  return {std::max(out, in), static_cast<double>(std::max(shards - held, held * (workers - 1)))};
}

/// The phase ends when the busiest host is done:
/// latency + max_n [overhead x messages_n + bytes_n / B].
double exchange_seconds(double payload, int32_t workers, int32_t shards, const link_model& link) {
  if (workers == 1)
    return 0;
  double slowest = 0;
  for (int32_t n = 0; n < workers; ++n) {
    const host_exchange h = host_exchange_of(payload, workers, shards, n);
    slowest = std::max(slowest, link.message_overhead * h.messages + h.bytes / link.bandwidth);
  }
  return link.latency + slowest;
}

/// The most bytes a host's link carries in one direction of
/// exchange_seconds: what its token bucket credits.
double exchange_bytes(double payload, int32_t workers, int32_t shards) {
  double most = 0;
  for (int32_t n = 0; workers > 1 && n < workers; ++n)
    most = std::max(most, host_exchange_of(payload, workers, shards, n).bytes);
  return most;
}

/// One exchange_seconds after its link idled `idle` seconds, less the
/// bucket's credit.
double credited_exchange(double payload, int32_t workers, int32_t shards, token_bucket& tokens,
                         double idle, const link_model& link) {
  return exchange_seconds(payload, workers, shards, link) -
         tokens.send(exchange_bytes(payload, workers, shards), idle);
}

/// Bytes each host sends in a ring all-reduce of `bytes`: 2 (W - 1) / W of them.
double ring_host_bytes(double bytes, int32_t hosts) {
  return 2.0 * (hosts - 1) * bytes / hosts;
}

/// The share of shards on the host holding the most: its shards' updates
/// run one after the other.
double busiest_shard_share(int32_t workers, int32_t shards) {
  const int32_t most = (shards + workers - 1) / workers;
  return static_cast<double>(most) / shards;
}

/// A prediction of a strategy where every host trains its own batch_size
/// samples a step (data-parallel and IST).
prediction on_every_host(const workload& w, const cluster& c) {
  prediction p;
  p.hosts = c.hosts;
  p.samples_per_step = static_cast<double>(c.hosts) * w.batch_size;
  return p;
}

// -- one prediction per strategy ---------------------------------------------------------

prediction predict_local(const workload& w, const cluster&, const local_strategy& s) {
  check(w, s.freeze);
  prediction p;
  p.compute_seconds = local_step_seconds(w, s);
  p.samples_per_step = w.batch_size * s.workers;
  return p;
}

/// Every worker runs the whole step on its own batch; the buckets go on the
/// ring in backward order, each when the backward has produced it (overlap)
/// or all after the backward, one after the other: bucket k ends at
/// max(ready_k, end_{k-1}) + ring_allreduce(bytes_k). The step ends at
/// max(backward end, last bucket's end) + update.
prediction predict_ring(const workload& w, const cluster& c, const ring_strategy& s) {
  check(w, s.freeze);
  const step_compute compute = compute_of(w, w.batch_size, s.freeze);
  const double scale = scale_of(w, w.batch_size);
  const double backward_end = compute.forward + compute.backward;
  const auto buckets = gradient_buckets(w.layers, s.freeze.frozen_layers, s.bucket_mb);
  // Two steps: the second has the link's token bucket in its steady state.
  token_bucket tokens(c.link);
  double ring_end = 0, quiet_since = 0; // this step's times; the link went quiet at quiet_since
  for (int step = 0; step < 2; ++step) {
    ring_end = 0;
    for (const bucket& b : buckets) {
      double ready = backward_end;
      if (s.overlap) {
        ready = compute.forward;
        for (size_t k = b.first_layer; k < w.layers.size(); ++k)
          ready += w.layers[k].backward_seconds * scale;
      }
      const double start = std::max(ready, ring_end);
      ring_end = start + ring_allreduce_seconds(b.bytes, c.hosts, c.link) -
                 tokens.send(ring_host_bytes(b.bytes, c.hosts), start - quiet_since);
      quiet_since = ring_end;
    }
    // The next step starts after the update: the link's quiet time carries over.
    quiet_since -= std::max(backward_end, ring_end) + compute.update;
  }
  prediction p = on_every_host(w, c);
  p.compute_seconds = compute.total();
  p.communication_seconds = std::max(0.0, ring_end - backward_end);
  p.wire_bytes = 2.0 * (c.hosts - 1) * compute.gradient_bytes;
  return p;
}

/// Forward and backward on the worker; push the gradient's slices to the
/// shards, the shards step (the busiest host's shards one after the other),
/// pull the new slices: nothing overlaps.
prediction predict_ps(const workload& w, const cluster& c, const ps_strategy& s) {
  check(w, s.freeze);
  const int32_t shards = s.shards == 0 ? c.hosts : s.shards;
  require(shards >= 1, "ps shards >= 1 (0: one per host), got " + std::to_string(s.shards));
  const step_compute compute = compute_of(w, w.batch_size, s.freeze);
  const double update = compute.update * busiest_shard_share(c.hosts, shards);
  // Two steps: the second has the link's token bucket in its steady state.
  token_bucket tokens(c.link);
  double push = 0, pull = 0;
  for (int step = 0; step < 2; ++step) {
    push = credited_exchange(compute.gradient_bytes, c.hosts, shards, tokens,
                             compute.forward + compute.backward, c.link);
    pull = credited_exchange(compute.gradient_bytes, c.hosts, shards, tokens, update, c.link);
  }
  prediction p = on_every_host(w, c);
  p.compute_seconds = compute.forward + compute.backward + update;
  p.communication_seconds = push + pull;
  p.wire_bytes = 2.0 * (c.hosts - 1) * compute.gradient_bytes;
  return p;
}

/// Local steps; every L steps the trainable weights averaged over the ring
/// (the same buckets, after the step: no overlap), amortised over the L steps.
/// The extra average at each epoch's end is not counted.
prediction predict_local_sgd(const workload& w, const cluster& c, const local_sgd_strategy& s) {
  check(w, s.freeze);
  require(s.sync_every >= 1, "sync_every >= 1, got " + std::to_string(s.sync_every));
  const step_compute compute = compute_of(w, w.batch_size, s.freeze);
  const auto buckets = gradient_buckets(w.layers, s.freeze.frozen_layers, s.bucket_mb);
  // Two averages: the second has the link's token bucket in its steady
  // state; the first bucket's link idled for the L steps.
  token_bucket tokens(c.link);
  double average = 0;
  for (int round = 0; round < 2; ++round) {
    average = 0;
    double idle = s.sync_every * compute.total();
    for (const bucket& b : buckets) {
      average += ring_allreduce_seconds(b.bytes, c.hosts, c.link) -
                 tokens.send(ring_host_bytes(b.bytes, c.hosts), std::exchange(idle, 0.0));
    }
  }
  prediction p = on_every_host(w, c);
  p.compute_seconds = compute.total();
  p.communication_seconds = average / s.sync_every;
  p.wire_bytes = 2.0 * (c.hosts - 1) * compute.gradient_bytes / s.sync_every;
  return p;
}

/// Each worker trains its subnet (ist_worker_step_seconds a step) for L
/// steps; per round its subnet's slices come from the shards and go back
/// (two exchanges), amortised over the L steps, with the round's own work
/// (ist_round_of): the worker's assembly and cut are its compute, the
/// shards' partition and the W pieces they take and write back what it
/// waits for beside the exchanges. An epoch is
/// floor(samples / batch_size / W) steps, as model::ist::steps_per_epoch.
prediction predict_ist(const workload& w, const cluster& c, const ist_strategy& s) {
  const int32_t shards = s.shards == 0 ? c.hosts : s.shards;
  require(shards >= 1, "ist shards >= 1, got " + std::to_string(s.shards));
  require(s.local_steps >= 1, "ist local_steps >= 1, got " + std::to_string(s.local_steps));
  require(s.subnet_fraction >= 0 && s.subnet_fraction <= 1, "ist subnet_fraction in [0, 1]");
  require(s.subnet_step_seconds >= 0, "ist subnet_step_seconds >= 0");
  const double fraction = ist_subnet_fraction_of(s, c.hosts);
  const step_compute whole = compute_of(w, w.batch_size, freezing{});
  const double subnet_bytes = whole.gradient_bytes * fraction;
  const double step = ist_worker_step_seconds(w, s, c.hosts);
  const ist_round_seconds own = ist_round_of(s, c.hosts, shards);
  const double round_compute = step * s.local_steps + own.assemble + own.split;
  // Two rounds: the second has the link's token bucket in its steady state.
  // The slices go back after the L steps and the next round's come at once.
  token_bucket tokens(c.link);
  double back = 0, out = 0;
  for (int round = 0; round < 2; ++round) {
    back = credited_exchange(subnet_bytes, c.hosts, shards, tokens, round_compute, c.link);
    out = credited_exchange(subnet_bytes, c.hosts, shards, tokens, 0, c.link);
  }
  prediction p = on_every_host(w, c);
  p.compute_seconds = round_compute / s.local_steps;
  // A shard takes the W workers' pieces one after the other and writes
  // them back as they come, one after the other: the last is written back
  // after W takes and one put, or after one take and W puts.
  const double shard_work =
    own.partition + std::max(c.hosts * own.take + own.put, own.take + c.hosts * own.put);
  p.communication_seconds = (back + out + shard_work) / s.local_steps;
  p.wire_bytes = 2.0 * (c.hosts - 1) * subnet_bytes / s.local_steps;
  p.steps_per_epoch = w.samples_per_epoch / w.batch_size / c.hosts;
  return p;
}

// -- pipeline -----------------------------------------------------------------------------

/// Per microbatch of one stage: its compute (divided by its replicas, which
/// take every r-th microbatch), the link after it, its replica group's
/// exchange of gradient sums once per minibatch ((r - 1) messages of the
/// stage's parameters), and its optimiser step.
struct stage_figures {
  double compute = 0;    ///< forward + backward (+ update under 1f1b), / replicas
  double update = 0;     ///< one optimiser step
  double link = 0;       ///< 2 x (overhead + boundary activation / B): activation out, gradient back
  double link_bytes = 0; ///< 2 x the boundary activation
  double group_seconds = 0;
  double group_bytes = 0;
};

/// What the layers cost a pipeline per microbatch, the unit its stages and
/// links are compared in.
struct microbatch_costs {
  std::vector<double> prefix; ///< prefix[k]: compute of layers [0, k) per microbatch
  double scale = 1;           ///< microbatch samples / profiled batch
  const workload* w = nullptr;
  const link_model* link = nullptr;

  microbatch_costs(const workload& load, const link_model& l, const pipeline_strategy& s)
      : w(&load), link(&l) {
    scale = scale_of(load, static_cast<double>(load.batch_size) / s.microbatches);
    const bool step_each_microbatch = s.schedule == pipeline_schedule::one_f_one_b;
    prefix.assign(load.layers.size() + 1, 0);
    for (size_t k = 0; k < load.layers.size(); ++k) {
      const auto& layer = load.layers[k];
      prefix[k + 1] = prefix[k] + (layer.forward_seconds + layer.backward_seconds) * scale +
                      (step_each_microbatch ? layer.update_seconds : 0);
    }
  }
  /// Layers [begin, end) on one machine.
  double stage(size_t begin, size_t end) const { return prefix[end] - prefix[begin]; }
  /// Bytes over the link after layer end - 1: its activation out, its gradient back.
  double link_bytes(size_t end) const { return 2 * w->layers[end - 1].activation_bytes * scale; }
  double link_seconds(size_t end) const {
    return 2 * link->message_overhead + link_bytes(end) / link->bandwidth;
  }
};

/// The stage ends of the straight pipeline of exactly `stages` stages whose
/// slowest stage or link is the fastest (the planner's dynamic program
/// without replication or memory): best[s][j] = min over i of
/// max(best[s - 1][i], link after i, stage [i, j)).
std::vector<size_t> fastest_stage_ends(const microbatch_costs& costs, size_t stages) {
  const size_t n = costs.prefix.size() - 1;
  constexpr double none = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, none));
  std::vector<std::vector<size_t>> cut(stages + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t s = 1; s <= stages; ++s)
    for (size_t j = s; j <= n; ++j)
      for (size_t i = s - 1; i < j; ++i) {
        const double link = i > 0 ? costs.link_seconds(i) : 0.0;
        const double slowest = std::max({best[s - 1][i], link, costs.stage(i, j)});
        if (slowest < best[s][j]) {
          best[s][j] = slowest;
          cut[s][j] = i;
        }
      }
  std::vector<size_t> ends(stages);
  for (size_t s = stages, j = n; s > 0; j = cut[s][j], --s)
    ends[s - 1] = j;
  return ends;
}

void check_stages(const workload& w, const pipeline_strategy& s, const std::vector<size_t>& ends,
                  const std::vector<int32_t>& replicas) {
  size_t previous = 0;
  for (size_t end : ends) {
    require(end > previous, "stage ends increasing from 1, got " + std::to_string(end));
    previous = end;
  }
  require(previous == w.layers.size(),
          "the last stage end = the layer count " + std::to_string(w.layers.size()));
  require(replicas.size() == ends.size(), "one replica count per stage");
  for (int32_t r : replicas)
    require(r >= 1 && r <= s.microbatches, "1 <= replicas <= microbatches per stage");
}

std::vector<stage_figures> stage_figures_of(const microbatch_costs& costs,
                                            const std::vector<size_t>& ends,
                                            const std::vector<int32_t>& replicas,
                                            const std::vector<bool>& weight_gradient_next) {
  std::vector<stage_figures> out;
  size_t begin = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    stage_figures f;
    double parameters = 0;
    for (size_t l = begin; l < ends[k]; ++l) {
      f.update += costs.w->layers[l].update_seconds;
      parameters += costs.w->layers[l].parameter_bytes;
    }
    const int32_t r = replicas[k];
    f.compute = costs.stage(begin, ends[k]) / r;
    if (k + 1 < ends.size()) {
      f.link_bytes = costs.link_bytes(ends[k]);
      f.link = costs.link_seconds(ends[k]);
    }
    f.group_seconds = (r - 1) * costs.link->message_seconds(parameters);
    f.group_bytes = static_cast<double>(r) * (r - 1) * parameters;
    out.push_back(f);
    begin = ends[k];
  }
  for (const auto& h : handed_on_halves(*costs.w, ends, weight_gradient_next, costs.scale)) {
    const size_t k = h.stage;
    out[k].compute -= h.seconds / replicas[k];
    out[k + 1].compute += h.seconds / replicas[k + 1];
    out[k].link_bytes += h.input_bytes + h.gradient_bytes;
    // Three messages: the output (with the input), the gradient, the weight half.
    out[k].link = 3 * costs.link->message_overhead + out[k].link_bytes / costs.link->bandwidth;
  }
  return out;
}

/// The evaluation of the test samples through the stages, in microbatches
/// of b / M samples (forward only, the activation one way): one leaves every
/// t = the slowest stage's forward or link, after the first has crossed
/// every stage and link.
double pipeline_evaluation(const workload& w, const link_model& link, const pipeline_strategy& s,
                           const std::vector<size_t>& ends) {
  if (w.test_samples <= 0)
    return 0;
  const double samples = std::max(1.0, static_cast<double>(w.batch_size) / s.microbatches);
  const double scale = scale_of(w, samples);
  double slowest = 0, first = 0;
  size_t begin = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    double forward = 0;
    for (size_t l = begin; l < ends[k]; ++l)
      forward += w.layers[l].forward_seconds * scale;
    double send = 0;
    if (k + 1 < ends.size())
      send = link.message_seconds(w.layers[ends[k] - 1].activation_bytes * scale);
    slowest = std::max({slowest, forward, send});
    first += forward + send;
    begin = ends[k];
  }
  const double microbatches = std::ceil(static_cast<double>(w.test_samples) / samples);
  return first + (microbatches - 1) * slowest;
}

/// Steady state: one microbatch leaves the pipeline every t_slot = the
/// slowest stage or link. A minibatch of M microbatches takes M x t_slot;
/// filling and draining the pipeline adds (S - 1) x t_slot (the bubble) and
/// 2 (S - 1) link latencies. gpipe and 1f1b-flush drain every minibatch and
/// step once after it (+ the slowest stage's update); 1f1b drains once per
/// epoch (the evaluation), so its bubble is amortised over the epoch's steps.
/// Replica groups exchange once per minibatch, on the critical path.
prediction predict_stages(const workload& w, const cluster& c, const pipeline_strategy& s,
                          const std::vector<size_t>& ends, const std::vector<int32_t>& replicas) {
  const microbatch_costs costs(w, c.link, s);
  double slowest_stage = 0, slowest = 0, update = 0, group = 0, bytes = 0;
  for (const auto& f : stage_figures_of(costs, ends, replicas, s.weight_gradient_next)) {
    slowest_stage = std::max(slowest_stage, f.compute);
    slowest = std::max({slowest, f.compute, f.link});
    update = std::max(update, f.update);
    group = std::max(group, f.group_seconds);
    bytes += f.link_bytes * s.microbatches + f.group_bytes;
  }
  const double boundaries = static_cast<double>(ends.size() - 1);
  prediction p;
  p.hosts = 0;
  for (int32_t r : replicas)
    p.hosts += r;
  p.samples_per_step = w.batch_size;
  if (w.samples_per_epoch > 0)
    p.steps_per_epoch = ceil_steps(w.samples_per_epoch, p.samples_per_step);
  const bool flush = s.schedule != pipeline_schedule::one_f_one_b;
  // 1f1b fills once per epoch; without an epoch size, nothing to amortise over.
  const double fills = flush ? 1.0 : (p.steps_per_epoch > 0 ? 1.0 / p.steps_per_epoch : 0.0);
  p.compute_seconds = s.microbatches * slowest_stage + (flush ? update : 0);
  p.communication_seconds = s.microbatches * (slowest - slowest_stage) + group +
                            fills * 2 * boundaries * c.link.latency;
  p.waiting_seconds = fills * boundaries * slowest;
  p.step_seconds = p.compute_seconds + p.communication_seconds + p.waiting_seconds;
  p.wire_bytes = bytes;
  p.evaluation_seconds = pipeline_evaluation(w, c.link, s, ends);
  return p;
}

/// The stages given, or the fastest straight pipeline on at most
/// min(W, layers) hosts (pipeline_stage_ends_of).
prediction predict_pipeline(const workload& w, const cluster& c, const pipeline_strategy& s) {
  require(s.microbatches >= 1, "microbatches >= 1, got " + std::to_string(s.microbatches));
  const auto ends = pipeline_stage_ends_of(w, c, s);
  std::vector<int32_t> replicas = s.stage_ends.empty() ? std::vector<int32_t>{} : s.replicas;
  if (replicas.empty())
    replicas.assign(ends.size(), 1);
  if (!s.stage_ends.empty())
    check_stages(w, s, ends, replicas);
  return predict_stages(w, c, s, ends, replicas);
}

/// Seconds of one epoch's evaluation: a pipeline's as predict_stages found
/// it for its stages; IST's worker 0 first pulls the whole network from the
/// shards ((W - 1) / W of its parameters over its link); the others: the
/// forward on one host.
double evaluation_of(const workload& w, const cluster& c, const strategy& s,
                     const prediction& p) {
  if (w.test_samples <= 0)
    return 0;
  if (std::holds_alternative<pipeline_strategy>(s))
    return p.evaluation_seconds;
  double pull = 0;
  if (std::holds_alternative<ist_strategy>(s) && c.hosts > 1) {
    const double whole = compute_of(w, 1, freezing{}).gradient_bytes;
    // After an epoch of rounds the link's bucket is full.
    const double bytes = whole * (c.hosts - 1) / c.hosts;
    pull = c.link.message_seconds(bytes) - std::min(bytes, c.link.burst) / c.link.bandwidth;
  }
  return evaluation_forward(w) + pull;
}

} // namespace

// -- public -------------------------------------------------------------------------------

int32_t rounds_of(const local_strategy& s) {
  require(s.workers >= 1 && s.lanes >= 1, "local: workers >= 1 and lanes >= 1");
  return (s.workers + s.lanes - 1) / s.lanes;
}

double local_step_seconds(const workload& w, const local_strategy& s) {
  if (s.loop_step_seconds > 0)
    return s.loop_step_seconds;
  const step_compute c =
    compute_of(w, static_cast<double>(w.batch_size) * rounds_of(s), s.freeze);
  return c.forward + c.backward + c.update;
}

double link_model::message_seconds(double bytes) const {
  return latency + message_overhead + bytes / bandwidth;
}

double token_bucket::send(double bytes, double idle_seconds) {
  tokens_ = std::min(link_.burst, tokens_ + std::max(0.0, idle_seconds) * link_.bandwidth);
  const double passed = std::min(bytes, tokens_);
  tokens_ -= passed;
  return passed / link_.bandwidth;
}

double prediction::samples_per_second() const {
  return step_seconds > 0 ? samples_per_step / step_seconds
                          : std::numeric_limits<double>::infinity();
}

double prediction::epoch_seconds() const {
  return static_cast<double>(steps_per_epoch) * step_seconds;
}

double prediction::seconds_for_epochs(double epochs) const {
  return epochs * epoch_seconds();
}

double ring_allreduce_seconds(double bytes, int32_t hosts, const link_model& link) {
  if (hosts <= 1 || bytes <= 0)
    return 0;
  // Two hosts swap their halves' messages at once: one latency, not two.
  if (hosts == 2)
    return 2.0 * link.message_seconds(bytes / 2) - link.latency;
  return 2.0 * (hosts - 1) * link.message_seconds(bytes / hosts);
}

std::vector<bucket> gradient_buckets(const std::vector<layer_profile>& layers,
                                     size_t frozen_layers, double bucket_mb) {
  require(bucket_mb > 0, "bucket_mb > 0");
  std::vector<bucket> out;
  bucket current;
  for (size_t k = layers.size(); k-- > frozen_layers;) {
    if (layers[k].parameter_bytes <= 0)
      continue; // no gradient
    current.bytes += layers[k].parameter_bytes;
    current.first_layer = k;
    if (current.bytes >= bucket_mb * mebibyte)
      out.push_back(std::exchange(current, bucket{}));
  }
  if (current.bytes > 0)
    out.push_back(current);
  return out;
}

double ist_mlp_subnet_fraction(int64_t inputs, const std::vector<int64_t>& hidden,
                               int64_t classes, int32_t workers) {
  require(!hidden.empty() && inputs > 0 && classes > 0 && workers >= 1,
          "an mlp with inputs, classes, at least one hidden width and workers >= 1");
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  const double wk = workers;
  double whole = d(inputs) * d(hidden.front()) + d(classes) * d(hidden.back());
  double subnet = whole / wk;
  for (size_t k = 0; k < hidden.size(); ++k) {
    whole += 2 * d(hidden[k]);
    subnet += 2 * d(hidden[k]) / wk;
    if (k > 0) {
      whole += d(hidden[k]) * d(hidden[k - 1]);
      subnet += d(hidden[k]) * d(hidden[k - 1]) / (wk * wk);
    }
  }
  return subnet / whole;
}

double scale_of(const workload& w, double batch) {
  return batch / static_cast<double>(w.profiled_batch);
}

step_compute compute_of(const workload& w, double batch, const freezing& f) {
  const double scale = scale_of(w, batch);
  step_compute s;
  s.backward_of.assign(w.layers.size(), 0);
  for (size_t k = 0; k < w.layers.size(); ++k) {
    const auto& l = w.layers[k];
    const bool frozen = k < f.frozen_layers;
    if (!(frozen && f.cache))
      s.forward += l.forward_seconds * scale;
    if (frozen)
      continue;
    s.backward_of[k] = l.backward_seconds * scale;
    s.backward += s.backward_of[k];
    s.update += l.update_seconds;
    s.gradient_bytes += l.parameter_bytes;
  }
  return s;
}

double ist_subnet_fraction_of(const ist_strategy& s, int32_t workers) {
  if (s.subnet_fraction > 0)
    return s.subnet_fraction;
  if (s.mlp_inputs > 0)
    return ist_mlp_subnet_fraction(s.mlp_inputs, s.mlp_hidden, s.mlp_classes, workers);
  return 1.0 / workers;
}

ist_round_seconds ist_round_of(const ist_strategy& s, int32_t workers, int32_t shards) {
  if (s.timed_shards < 1 || s.subnet_workers < 1)
    return {};
  const double subnet =
    ist_subnet_fraction_of(s, workers) / ist_subnet_fraction_of(s, s.subnet_workers);
  const double piece = subnet * s.timed_shards / std::max(1, shards);
  ist_round_seconds r = s.round;
  r.assemble *= subnet;
  r.split *= subnet;
  r.take *= piece;
  r.put *= piece;
  return r;
}

double ist_worker_step_seconds(const workload& w, const ist_strategy& s, int32_t workers) {
  const double fraction = ist_subnet_fraction_of(s, workers);
  if (s.subnet_step_seconds > 0 && s.subnet_workers >= 1)
    return s.subnet_step_seconds * fraction / ist_subnet_fraction_of(s, s.subnet_workers);
  return fraction * compute_of(w, static_cast<double>(w.batch_size), freezing{}).total();
}

std::vector<handed_on_half> handed_on_halves(const workload& w, const std::vector<size_t>& ends,
                                             const std::vector<bool>& next, double scale) {
  std::vector<handed_on_half> out;
  for (size_t k = 0; k + 1 < ends.size() && k < next.size(); ++k) {
    const size_t last = ends[k] - 1;
    if (!next[k] || last == 0)
      continue;
    out.push_back({k, w.layers[last].weight_gradient_seconds * scale,
                   w.layers[last - 1].activation_bytes * scale, w.layers[last].parameter_bytes});
  }
  return out;
}

/// For each stage count the fastest stage ends, then the count with the
/// shortest predicted step (fewer stages on a tie).
std::vector<size_t> pipeline_stage_ends_of(const workload& w, const cluster& c,
                                           const pipeline_strategy& s) {
  if (!s.stage_ends.empty())
    return s.stage_ends;
  require(s.microbatches >= 1, "microbatches >= 1, got " + std::to_string(s.microbatches));
  const microbatch_costs costs(w, c.link, s);
  prediction fastest;
  std::vector<size_t> fastest_ends;
  const size_t most = std::min<size_t>(static_cast<size_t>(c.hosts), w.layers.size());
  for (size_t stages = 1; stages <= most; ++stages) {
    auto ends = fastest_stage_ends(costs, stages);
    prediction p = predict_stages(w, c, s, ends, std::vector<int32_t>(stages, 1));
    if (stages == 1 || p.step_seconds < fastest.step_seconds) {
      fastest = p;
      fastest_ends = std::move(ends);
    }
  }
  return fastest_ends;
}

std::string name_of(const strategy& s) {
  return std::visit(
    overloaded{[](const local_strategy&) { return std::string("local"); },
               [](const ring_strategy&) { return std::string("data-parallel:ring"); },
               [](const ps_strategy&) { return std::string("data-parallel:ps"); },
               [](const local_sgd_strategy&) { return std::string("data-parallel:local-sgd"); },
               [](const pipeline_strategy& p) {
                 switch (p.schedule) {
                 case pipeline_schedule::gpipe: return std::string("pipeline:gpipe");
                 case pipeline_schedule::one_f_one_b_flush: return std::string("pipeline:1f1b-flush");
                 case pipeline_schedule::one_f_one_b: break;
                 }
                 return std::string("pipeline:1f1b");
               },
               [](const ist_strategy&) { return std::string("ist"); }},
    s);
}

prediction predict(const workload& w, const cluster& c, const strategy& s) {
  check(w, c);
  prediction p = std::visit(
    overloaded{[&](const local_strategy& x) { return predict_local(w, c, x); },
               [&](const ring_strategy& x) { return predict_ring(w, c, x); },
               [&](const ps_strategy& x) { return predict_ps(w, c, x); },
               [&](const local_sgd_strategy& x) { return predict_local_sgd(w, c, x); },
               [&](const pipeline_strategy& x) { return predict_pipeline(w, c, x); },
               [&](const ist_strategy& x) { return predict_ist(w, c, x); }},
    s);
  p.strategy = name_of(s);
  if (c.shared_cores > 0) {
    // Hosts emulated on one machine take turns on its cores.
    const double stretch = std::max(1.0, static_cast<double>(p.hosts) / c.shared_cores);
    p.compute_seconds *= stretch;
    p.waiting_seconds *= stretch;
  }
  return finish(p, w, evaluation_of(w, c, s, p));
}

} // namespace baton::model::cost
