#pragma once

// A discrete-event simulation of a training plan (issue 34 part 2): actors
// placed on hosts, each running a program of operations (compute, send,
// receive), the hosts' cores shared by the actors on them (processor
// sharing), messages over links with latency, bandwidth per direction, a
// token bucket per direction (link_model::burst: what passes at once after
// the link idled) and a per-message cost that occupies the sender and the
// receiver, and credit
// windows (at most K messages in flight per edge). A strategy's schedule is
// written into the programs (model/cost/simulated_plans.hpp builds them);
// the simulator knows no strategy. Pure arithmetic: no torch, no actors.
// docs/cost-model.md ("The simulation").
//
// Units: seconds, bytes, bytes per second.

#include <cstdint>
#include <string>
#include <vector>

#include "model/cost/cost_model.hpp"

namespace baton::model::cost {

/// What the time an actor spends in an operation counts as in the split.
enum class time_kind { compute, communication, waiting };

/// One operation of an actor's program.
struct operation {
  enum class kind_t {
    compute,  ///< `seconds` of one core's work (stretched when the cores are shared)
    send,     ///< `bytes` to actor `peer`; blocks while `window` messages to it are unconsumed
    receive,  ///< the next message from actor `peer` (FIFO per edge); blocks until it is there
    step_end, ///< a step of this actor ends here
  };
  kind_t kind = kind_t::compute;
  double seconds = 0;
  double bytes = 0;
  int32_t peer = -1;  ///< an actor index (send: to, receive: from)
  int32_t window = 0; ///< send: the credit window of the edge (0: unbounded)
  /// compute: what it counts as (a message's bookkeeping is communication);
  /// receive: what the time blocked on it counts as (a pipeline's bubble is
  /// waiting, a gradient exchange communication).
  time_kind as = time_kind::compute;

  static operation compute(double seconds, time_kind as = time_kind::compute);
  static operation send(int32_t to, double bytes, int32_t window = 0);
  static operation receive(int32_t from, time_kind blocked_as = time_kind::communication);
  static operation step_end();
};

/// One actor: where it runs and what it does, step after step (the whole
/// simulated run, unrolled: a schedule that spans steps, as 1f1b does, is
/// written as it runs).
struct simulated_actor {
  std::string name;
  int32_t host = 0;               ///< index into simulated_plan::hosts
  /// Whether its time enters the split (workers and stages do; a ps shard
  /// or a ring's helper does not).
  bool reported = true;
  std::vector<operation> program; ///< every actor has the same number of step_ends
};

/// One host: a network endpoint, on a machine whose cores it may share with
/// other hosts (emulated hosts of one machine, `--local-nodes`).
struct simulated_host {
  int32_t machine = 0;            ///< index into simulated_plan::machine_cores
};

/// What cannot be read from a plan, measured once per machine
/// (apps/predict/runtime_calibration.hpp).
struct runtime_costs {
  /// CPU seconds the actor runtime spends on a message, at the sender and
  /// again at the receiver (enqueue, dispatch), any message.
  double message_seconds = 0;
  /// Seconds more for a message between hosts, at the sender and again at
  /// the receiver (the middleman's framing and its thread's hand-offs),
  /// beyond the link's own per-message cost.
  double remote_message_seconds = 0;
  /// CPU seconds per byte of a message between hosts, at the sender and again
  /// at the receiver (serialising, copying, deserialising).
  double byte_seconds = 0;
  /// CPU seconds per byte of a message between hosts, at the sender's
  /// machine and again at the receiver's, that no actor waits for (the
  /// runtime's I/O threads, the kernel's socket copies): beyond
  /// byte_seconds, it takes a share of its machine's cores while it runs.
  double io_byte_seconds = 0;
  /// Slowdown of a computation when k actors compute at once on k cores of
  /// one machine (memory bandwidth, caches): each runs 1 + colocation (k - 1)
  /// times slower than alone. 0: none.
  double colocation = 0;
};

/// The plan to simulate.
struct simulated_plan {
  std::vector<int32_t> machine_cores{1}; ///< cores per machine (>= 1)
  std::vector<simulated_host> hosts{simulated_host{}};
  link_model link;                       ///< every pair of hosts
  runtime_costs runtime;
  std::vector<simulated_actor> actors;
  /// Steps left out of the average (filling a pipeline, a first round).
  int32_t warmup_steps = 1;
  /// Steps left out at the end: a pipeline that never flushes drains there
  /// (its first stages ran their last forwards ahead, in earlier steps).
  int32_t cooldown_steps = 0;
};

/// The steady state of a simulated plan.
struct simulation {
  /// Mean seconds per step between the warm-up and the cool-down: (end of
  /// the last measured step - end of the warm-up's last) / measured steps, a
  /// step ending when every actor has passed it.
  double step_seconds = 0;
  /// The reported actors' mean time per measured step in each kind; idle
  /// time (done before the others) counts as waiting, so the three add up to
  /// step_seconds.
  double compute_seconds = 0;
  double communication_seconds = 0;
  double waiting_seconds = 0;
  /// Bytes between hosts per step: the run's over its steps (every plan
  /// sends alike each step; a sender's own measured steps would miss what
  /// a pipeline's stage sends a step ahead).
  double wire_bytes = 0;
  int32_t steps = 0;              ///< step_ends per actor
  double end_seconds = 0;         ///< when the last actor finished
};

/// Runs `p` to its end, from the steady state of its links' token buckets
/// (a plan's few steps would neither drain a burst larger than a step's
/// shortfall nor fill an empty one: the plan runs from where they likely
/// stand, then from where each run left them, until they hold). Throws
/// model::error on a plan that makes no sense (no actors, a bad index,
/// unequal step counts, no step after the warm-up) or that deadlocks
/// (naming the actors blocked and on whom).
simulation simulate(const simulated_plan& p);

} // namespace baton::model::cost
