#pragma once

// The cost model of issue 24: the time of one training step of each of
// baton's strategies, predicted from a workload's profile (`baton profile`'s
// per-layer times and bytes on this machine) and a link model. Pure
// arithmetic: no torch, no actors, tested against hand-computed cases
// (tests/model/cost/cost_model_test.cpp); docs/cost-model.md has the same
// formulas for users.
//
// Units: seconds, bytes, bytes per second, samples.
//
// What is assumed everywhere (each strategy adds its own below):
// - Compute scales linearly with the batch: forward and backward of a layer
//   at b samples take (b / profiled_batch) x the profiled times; activation
//   bytes scale the same way; an optimiser step and the parameter bytes do
//   not depend on the batch. Small-batch inefficiency is not modelled.
// - Every host has one full-duplex link of `bandwidth` bytes/s each way; a
//   message of n bytes takes latency + message_overhead + n / bandwidth. The
//   switch is never the bottleneck (every host pair at full rate at once).
//   A link with a burst (link_model::burst) credits each exchange of the
//   data-parallel strategies and IST with its token bucket (token_bucket),
//   refilled while the link idled before it; a pipeline's per-microbatch
//   messages are not credited (a link that limits a pipeline never idles).
// - One thread of compute per host; compute and communication of a host
//   overlap only where a strategy says so.
// - Hosts are identical (the profile's machine), nothing fails, stragglers
//   are not modelled.
// - Statistical efficiency is not modelled: a prediction is time per step
//   (and per epoch), not time to an accuracy. Time to target = predicted time
//   per epoch x epochs to target measured at the sizes run (an assumption for
//   a larger W, not a prediction).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace baton::model::cost {

// -- inputs --------------------------------------------------------------------

/// What one layer costs at the profiled batch: the fields of
/// model::layer_cost (model/planning/partitioner.hpp), copied by the caller so
/// that this library needs neither the planner nor torch.
struct layer_profile {
  std::string name;
  double forward_seconds = 0;
  double backward_seconds = 0;
  double update_seconds = 0;   ///< one optimiser step of the layer's parameters
  double activation_bytes = 0; ///< the layer's output at the profiled batch
  double parameter_bytes = 0;  ///< also its gradient's bytes
  /// The part of backward_seconds the next stage computes when a stage ends
  /// with this layer under `weight_gradient: next` (a convolution's weight
  /// gradient); 0 for other layers.
  double weight_gradient_seconds = 0;
};

/// The workload: its profile and how it is batched.
struct workload {
  std::vector<layer_profile> layers;
  int64_t profiled_batch = 1;    ///< samples the profile was measured at (> 0)
  /// data.batch_size: samples per step of one worker (data-parallel, IST,
  /// local) or per minibatch of the pipeline (cut into its microbatches).
  int64_t batch_size = 1;
  int64_t samples_per_epoch = 0; ///< training samples per epoch (0: epochs not predicted)
  /// Test samples evaluated after every epoch (0: no evaluation counted).
  /// One host runs their forward through the whole model (data-parallel's
  /// and IST's worker 0; a pipeline's stages, pipelined) while the others
  /// wait: evaluation_seconds, amortised over the epoch's steps.
  int64_t test_samples = 0;
};

/// One link: what a message of n bytes costs.
struct link_model {
  double bandwidth = 125e6;      ///< bytes per second, each way (> 0); 1 Gbit/s = 125e6
  double latency = 0;            ///< seconds from send to arrival, per message
  double message_overhead = 0;   ///< seconds of sender/receiver work per message
  /// Bytes a shaped link lets pass at once after it idled (a token bucket:
  /// tc's tbf on emulated hosts, a cloud link's burst), refilled at
  /// `bandwidth` while the link carries nothing; 0 for a link without one.
  double burst = 0;
  /// The share of the rate a host's link delivers while it carries two or
  /// more connections at once (a worker's pushes to two shards, two
  /// shards' answers to one worker): TCP's flows do not split a link
  /// equally, and a phase of sends ends with its slowest flow. Measured
  /// by the link calibration's all-to-all (apps/predict/link_calibration);
  /// read by the simulation only. 1: the rate, split equally.
  double shared_efficiency = 1;
  /// latency + message_overhead + bytes / bandwidth.
  double message_seconds(double bytes) const;
};

/// A link's token bucket over a run: the credit of the bytes sent in turn.
/// Start it full, send a step's phases in order, each after the seconds its
/// link idled; a phase of n bytes passes min(n, tokens) at once and the rest
/// at the rate (the bucket empties while the link is busy). A step's second
/// pass gives the steady state.
class token_bucket {
public:
  explicit token_bucket(const link_model& link) : link_(link), tokens_(link.burst) {}
  /// The seconds `bytes` save against their time at the rate, after the link
  /// idled `idle_seconds`: min(bytes, tokens) / bandwidth.
  double send(double bytes, double idle_seconds);

private:
  const link_model& link_;
  double tokens_;
};

/// W hosts joined by one kind of link.
struct cluster {
  int32_t hosts = 1;             ///< W >= 1
  link_model link;
  /// Cores the hosts share, when they are emulated on one machine
  /// (`--local-nodes W` on C cores): compute and waiting stretch by
  /// max(1, hosts used / cores). 0: every host has its own core.
  int32_t shared_cores = 0;
};

/// A frozen prefix (data_parallel.freeze.up_to): its layers run forward only,
/// with no backward, no optimiser step and no bytes on the wire. With the
/// cache (freeze.cache: memory) the prefix's output is read from memory after
/// the first epoch, so its forward is gone too: the prediction is the steady
/// state of epochs 2 and later (epoch 1 costs as without the cache; filling
/// the cache is free).
struct freezing {
  size_t frozen_layers = 0;      ///< layers [0, frozen_layers) are frozen
  bool cache = false;
};

// -- strategies ------------------------------------------------------------------

/// `--mode local`: one process trains `workers` x batch_size (b) samples
/// per step, its workers computed `lanes` at a time (each lane on its
/// share of the cores, as the profile was taken).
///   step = the loop's step as timed (loop_step_seconds), else
///   F + B at ceil(workers / lanes) x b samples + U, where F, B are the
///   forward and backward of every layer (a frozen prefix: see freezing)
///   and U the profile's update of the trainable layers. No communication,
///   no waiting.
struct local_strategy {
  freezing freeze;
  int32_t workers = 1;
  int32_t lanes = 1;
  /// The loop's steady step timed whole (model::time_reference_steps: its
  /// lanes, the workers' mean and the step, and what joins them); 0: not
  /// measured.
  double loop_step_seconds = 0;
};

/// The samples each lane of `s` computes per step, in worker batches.
int32_t rounds_of(const local_strategy& s);

/// The compute of one step of `s` (the formula above).
double local_step_seconds(const workload& w, const local_strategy& s);

/// data-parallel, exchange: ring (every step's gradients all-reduced).
/// Each of the W hosts runs F + B + U on its own b samples (W b samples a
/// step). The trainable gradients G are cut into buckets (gradient_buckets);
/// bucket k (g_k bytes) is ready when the backward has passed its first
/// layer: ready_k = F + sum of the backward of layers >= that layer (with
/// overlap; without: F + B), and the buckets go on the ring one after the
/// other: end_k = max(ready_k, end_{k-1}) + ring_allreduce_seconds(g_k).
///   step = max(F + B, end_last) + U;  communication = max(0, end_last - (F + B))
///   wire bytes = 2 (W - 1) G (each host sends 2 (W - 1) / W of G).
/// The chunk reductions' arithmetic is not counted (it is memory-bound and
/// small next to the backward).
struct ring_strategy {
  freezing freeze;
  double bucket_mb = 25;         ///< data_parallel.bucket_mb (MiB)
  bool overlap = true;           ///< data_parallel.overlap
};

/// data-parallel, exchange: ps (BSP, max_staleness 0). Shard s lives on
/// host s % W (baton's default with --local-nodes W); a worker pushes G / S
/// to each shard, the shards sum and step, the worker pulls G / S from each:
///   step = F + B + push + U x ceil(S / W) / S + pull, nothing overlapped;
///   push = pull = exchange(G): latency + max over hosts n of
///     [overhead x max(S - k_n, k_n (W - 1)) + max(G (S - k_n) / S, k_n (W - 1) G / S) / bandwidth]
///   where k_n = the shards on host n (slices to or from a shard on the same
///   host do not use the wire). wire bytes = 2 (W - 1) G.
/// Bounded staleness (max_staleness > 0) is not modelled.
struct ps_strategy {
  freezing freeze;
  int32_t shards = 1;            ///< S >= 1, dealt round-robin over the W hosts (0: W)
};

/// data-parallel, sync_every: L >= 1 (local SGD). Each host steps on its own
/// gradients; every L steps the trainable weights (G bytes) are averaged
/// over the ring in the same buckets, after the step (no overlap):
///   step = F + B + U + sum_k ring_allreduce_seconds(g_k) / L
///   wire bytes = 2 (W - 1) G / L.
/// The extra average at each epoch's end is not counted.
struct local_sgd_strategy {
  freezing freeze;
  int32_t sync_every = 1;        ///< L
  double bucket_mb = 25;
};

enum class pipeline_schedule { gpipe, one_f_one_b_flush, one_f_one_b };

/// job: pipeline. Its step is one minibatch (batch_size samples in M
/// microbatches of b / M); under 1f1b that is M optimiser steps of each stage.
/// Per microbatch, stage s (r_s replicas, which take every r_s-th
/// microbatch) costs t_s = (F_s + B_s [+ U_s under 1f1b]) / r_s and the link
/// after it l_s = 2 (overhead + a_s / bandwidth), a_s its last layer's
/// activation at b / M samples (the activation goes out, its gradient comes
/// back over the same link, as the planner counts it). The pipeline delivers
/// one microbatch every t = max(max_s t_s, max_s l_s).
///   gpipe, 1f1b-flush: step = M t + (S - 1) t [bubble] + 2 (S - 1) latency
///                             + max_s U_s + group
///   1f1b:              step = M t + [(S - 1) t + 2 (S - 1) latency] / steps_per_epoch
///                             + group   (it drains once per epoch, for the evaluation)
///   group = max_s (r_s - 1) x message_seconds(P_s): a replicated stage's
///   replicas exchange their gradient sums (P_s bytes) once per minibatch.
///   compute = M max_s t_s (+ max_s U_s), communication = M (t - max_s t_s)
///   + latencies + group, waiting = the bubble.
///   wire bytes = M sum_s 2 a_s + sum_s r_s (r_s - 1) P_s.
/// Weight stashing's memory and vertical sync are not modelled.
struct pipeline_strategy {
  /// Each stage's end layer (exclusive), increasing, the last = the layer
  /// count. Empty: the fastest straight pipeline (one host per stage) on at
  /// most min(W, layers) hosts: for each stage count the ends whose slowest
  /// stage or link is fastest (the planner's dynamic program without
  /// replication or memory limit), then the count with the shortest step
  /// (fewer stages on a tie); prediction::hosts says how many it uses.
  std::vector<size_t> stage_ends;
  std::vector<int32_t> replicas; ///< per stage (empty: 1 each)
  int32_t microbatches = 1;      ///< M >= 1
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  /// Per stage of stage_ends: the next stage computes the weight gradient of
  /// its last layer (`weight_gradient: next`; empty: none). The moved time
  /// goes with it, the layer's input crosses beside its output and the
  /// weight gradient comes back after the input gradient (handed_on_halves).
  std::vector<bool> weight_gradient_next;
};

/// IST's round besides its local steps, as the runtime does it (timed:
/// actors::ist::time_round).
struct ist_round_seconds {
  double assemble = 0;  ///< a worker: the round's partition and its subnet from its pieces
  double split = 0;     ///< a worker: its trained subnet cut into every shard's pieces
  double partition = 0; ///< a shard: the round's partition
  double take = 0;      ///< a shard: its pieces of one worker's subnet
  double put = 0;       ///< a shard: one worker's trained pieces written back
};

/// job: ist. W workers (the hosts), S shards (dealt as the ps's), L local
/// steps per round. A worker trains its subnet, a fraction f of the
/// parameters (P) and of the compute, on its own b samples:
///   step = C + 2 exchange(f P) / L  (exchange as for the ps: the
///   subnet's slices from the shards at the round's start, back at its end)
///   C = f (F + B + U), or, with the subnet's step timed at W0 workers,
///   that step x f(W) / f(W0) (ist_worker_step_seconds)
///   wire bytes = 2 (W - 1) f P / L;  steps per epoch = floor(N / b / W).
/// A round's own work (ist_round_seconds), when timed, adds to it: the
/// worker's assembly and cut to its compute, the shards' partition, pieces
/// taken and pieces written back, which the workers wait for, to its
/// communication (ist_round_of).
struct ist_strategy {
  int32_t shards = 0;            ///< S (0: W, one per host)
  int32_t local_steps = 10;      ///< L >= 1
  /// A worker's subnet as a fraction of the network's parameters, which is
  /// also taken as its fraction of the compute (an mlp's flops follow its
  /// weights); 0: 1/W. ist_mlp_subnet_fraction gives IST's exact one.
  double subnet_fraction = 0;
  /// The mlp trained (inputs -> hidden... -> classes): when given (and
  /// subnet_fraction is 0), f = ist_mlp_subnet_fraction at the cluster's W,
  /// so that a projection to more hosts shrinks the subnets as IST does.
  int64_t mlp_inputs = 0;
  std::vector<int64_t> mlp_hidden;
  int64_t mlp_classes = 0;
  /// The subnet's own local step at batch_size samples at `subnet_workers`
  /// workers, timed as a worker runs it, 0: none. A subnet's smaller
  /// matrices and its layers' fixed costs do not shrink with f.
  double subnet_step_seconds = 0;
  int32_t subnet_workers = 0;
  /// A round's own work at `subnet_workers` workers and `timed_shards`
  /// shards, timed as the runtime does it (timed_shards 0: none).
  ist_round_seconds round;
  int32_t timed_shards = 0;
};

using strategy = std::variant<local_strategy, ring_strategy, ps_strategy, local_sgd_strategy,
                              pipeline_strategy, ist_strategy>;

/// "local", "data-parallel:ring", "data-parallel:ps", "data-parallel:local-sgd",
/// "pipeline:gpipe", "pipeline:1f1b-flush", "pipeline:1f1b", "ist": the names
/// of `baton compare --strategies`.
std::string name_of(const strategy& s);

// -- outputs -----------------------------------------------------------------------

/// The predicted steady-state step of one strategy on one cluster.
struct prediction {
  std::string strategy;
  int32_t hosts = 1;             ///< hosts the strategy uses (a pipeline: its stages' replicas)
  /// Seconds per step = compute + communication + waiting + evaluation.
  double step_seconds = 0;
  double compute_seconds = 0;       ///< on the critical path (the slowest stage for a pipeline)
  double communication_seconds = 0; ///< exposed: not hidden behind compute
  double waiting_seconds = 0;       ///< a pipeline's bubble; 0 for the others
  /// The evaluation after each epoch (workload::test_samples) per step:
  /// its forward over the test samples / steps_per_epoch (0 without an epoch).
  double evaluation_seconds = 0;
  double wire_bytes = 0;         ///< bytes sent between hosts per step, all hosts together
  double samples_per_step = 0;
  int64_t steps_per_epoch = 0;   ///< ceil(samples_per_epoch / samples_per_step)
  double samples_per_second() const;
  double epoch_seconds() const;  ///< steps_per_epoch x step_seconds
  /// Time to a target reached after `epochs` epochs (measured at the sizes
  /// run: statistical efficiency is assumed, not predicted): epochs x epoch_seconds.
  double seconds_for_epochs(double epochs) const;
};

/// The prediction of `s` for `w` on `c`. Throws model::error on a workload or
/// cluster that makes no sense (no layers, batch or hosts < 1, bandwidth <= 0,
/// a frozen prefix longer than the model, bad stage ends) with what was
/// expected.
prediction predict(const workload& w, const cluster& c, const strategy& s);

// -- building blocks (public for the tests and for callers that explain) -----------

/// A ring all-reduce of `bytes` over `hosts`: reduce-scatter then
/// all-gather, 2(W-1) rounds, in each every host sends a chunk of bytes/W to
/// its successor: 2(W-1) x link.message_seconds(bytes / W); 0 for W = 1.
/// Two hosts swap both halves at once (ring_exchange.hpp): one latency less.
double ring_allreduce_seconds(double bytes, int32_t hosts, const link_model& link);

/// Gradient buckets as model::make_buckets cuts them, at layer granularity:
/// trainable layers from the last to the first, a bucket closed once it holds
/// >= bucket_mb MiB. Each bucket's bytes and the index of its first layer
/// (the backward reaches it last: the bucket is ready when that layer's
/// backward ends).
struct bucket {
  double bytes = 0;
  size_t first_layer = 0;
};
std::vector<bucket> gradient_buckets(const std::vector<layer_profile>& layers,
                                     size_t frozen_layers, double bucket_mb);

/// IST's subnet fraction of an mlp (inputs -> hidden... -> classes, no
/// biases, batch norm weight and bias per hidden neuron), as
/// model::ist::bytes_formula counts a worker's subnet: first and last layers
/// / W, hidden-to-hidden / W^2, batch norm / W; divided by the whole
/// network's parameters.
double ist_mlp_subnet_fraction(int64_t inputs, const std::vector<int64_t>& hidden,
                               int64_t classes, int32_t workers);

/// Forward, backward and update of one step of the whole model at `batch`
/// samples, with a frozen prefix (its layers' compute is left out as
/// `freezing` says); the backward also per layer (0 when frozen), for the
/// buckets a ring exchanges as the backward passes.
struct step_compute {
  double forward = 0;
  double backward = 0;
  double update = 0;
  double gradient_bytes = 0; ///< trainable parameters
  std::vector<double> backward_of;
  double total() const { return forward + backward + update; }
};

/// batch / the profiled batch: how the profile's per-layer times scale.
double scale_of(const workload& w, double batch);
step_compute compute_of(const workload& w, double batch, const freezing& f);

/// IST's subnet fraction f for `workers` workers: subnet_fraction, else the
/// mlp's (ist_mlp_subnet_fraction), else 1 / W.
double ist_subnet_fraction_of(const ist_strategy& s, int32_t workers);

/// A worker's compute per IST step on `w` at `workers` workers: the
/// subnet's timed step x f(W) / f(subnet_workers) when there is one,
/// else f(W) x the whole network's F + B + U.
double ist_worker_step_seconds(const workload& w, const ist_strategy& s, int32_t workers);

/// A round's own work at `workers` workers and `shards` shards: the timed
/// one (s.round) with a worker's figures x f(W) / f(subnet_workers) and a
/// shard's pieces x (f(W) / S) / (f(subnet_workers) / timed_shards); all
/// zero when none was timed.
ist_round_seconds ist_round_of(const ist_strategy& s, int32_t workers, int32_t shards);

/// A pipeline's stage ends: the given ones, or (none given) the fastest
/// straight pipeline on at most min(W, layers) hosts, as predict chooses it.
std::vector<size_t> pipeline_stage_ends_of(const workload& w, const cluster& c,
                                           const pipeline_strategy& s);

/// A cut whose stage hands its last layer's weight half on to the next
/// (`weight_gradient: next`), per microbatch: the seconds moved from `stage`
/// to the next, the layer's input (sent beside the output) and its weight
/// gradients (sent back after the input gradient).
struct handed_on_half {
  size_t stage = 0;
  double seconds = 0;
  double input_bytes = 0;
  double gradient_bytes = 0;
};

/// The cuts of a pipeline with stage ends `ends` that `next` (per stage,
/// pipeline_strategy::weight_gradient_next) hands on, at microbatches of
/// `scale` x the profiled batch; a stage of one layer hands nothing on (its
/// input is the previous stage's output).
std::vector<handed_on_half> handed_on_halves(const workload& w, const std::vector<size_t>& ends,
                                             const std::vector<bool>& next, double scale);

} // namespace baton::model::cost
