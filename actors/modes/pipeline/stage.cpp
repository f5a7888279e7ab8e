#include "actors/modes/pipeline/stage.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include <ATen/ATen.h>
#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/epoch_sums.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/fanout.hpp"
#include "actors/flow/progress_pace.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "actors/flow/trace.hpp"
#include "actors/modes/pipeline/input_order.hpp"
#include "actors/modes/pipeline/replica_group.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/injected_faults.hpp"
#include "actors/roles/sender_handlers.hpp"
#include "actors/roles/training_counters.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/pretrain.hpp"
#include "model/core/stage_trainer.hpp"

namespace baton::actors {
inline namespace modes {
namespace pipeline {

namespace {

using messages::control;
using messages::control_kind;
using messages::gradient;
using messages::microbatch;
using messages::tensor_set;
using clock_type = activity::clock;

/// (drain_atom, int64 step, int32 size): under static 1F1B, the training
/// before the next drain point (evaluation, control) ends with step `step`
/// of `size` microbatches. Sent downstream and to the replica's peers, so
/// that a stage that has forwarded its share of that step takes its
/// cool-down backwards instead of waiting for a forward that cannot come
/// before them. A fact, not a place in the stream: it needs no order.
using drain_atom = caf::atom_constant<caf::atom("drain")>;

/// A microbatch between its forward and its backward at this stage.
struct in_flight_entry {
  caf::actor sender; ///< where its gradient goes
  int64_t step = 0;
  int32_t step_size = 1;
};

struct pipeline_state {
  std::string name;
  std::string node;
  stage_settings spec;
  std::shared_ptr<model::stage_trainer> trainer;

  caf::actor coordinator;
  fanout downstream; ///< the next stage or its replicas (none for the last stage)
  messages::edge_stats backward_edge;
  activity work;
  trace_recorder trace{false};
  double bubble_seconds = 0;
  std::optional<clock_type::time_point> last_training_work; ///< end of the last one

  /// Microbatches (with their senders) and controls, in arrival order.
  struct input {
    std::variant<microbatch, control> item;
    caf::actor sender;
  };
  std::deque<input> inputs;
  /// Static 1F1B with several upstream replicas: microbatches that arrived
  /// before their turn in the source's order (`order`), by id.
  std::map<int64_t, input> held;
  input_order order{0, 1};
  std::deque<gradient> gradients;
  std::map<std::pair<int, int32_t>, int32_t> control_copies; ///< (kind, epoch) -> copies
  std::map<int64_t, in_flight_entry> in_flight;
  int64_t steps_done = 0;                  ///< minibatches completed (flush schedules)
  int32_t backwards_in_step = 0;
  replica_group group;
  std::vector<caf::actor> peers; ///< the group's replicas by index (self: null)
  /// weight_gradient: next — the next stage's weight halves of this
  /// stage's last layer, by microbatch, until its backward here ran; and the
  /// microbatch whose backward ran before its half came (the stage waits:
  /// its step or its replica sum needs the half).
  std::map<int64_t, std::vector<at::Tensor>> weight_halves;
  std::optional<int64_t> awaiting_weight_half;

  training_counters counters; ///< epoch sums, epochs, exactly-once counts (checkpointed)
  std::optional<checkpointing> checkpoints;

  // -- static 1F1B's drain points ------------------------------------------
  std::vector<caf::actor> receivers;   ///< the downstream actors (drain notices)
  std::optional<microbatch_position> last_queued;  ///< last training input queued
  std::optional<microbatch_position> last_forward; ///< last training forward
  int64_t drain_step = -1; ///< training ends with this step before the next drain
  int32_t drain_size = 0;  ///< microbatches of drain_step
  progress_pace progress;
};

using pipeline_actor = caf::stateful_actor<pipeline_state>;

/// One step per minibatch (gpipe, 1f1b-flush), not one per microbatch.
bool flush(const pipeline_state& st) {
  return st.spec.schedule == "gpipe" || st.spec.schedule == "1f1b-flush";
}

/// PipeDream's static 1F1B order (see static_next), not the dynamic one.
bool static_order(const pipeline_state& st) {
  return st.spec.schedule == "1f1b";
}

bool replicated(const pipeline_state& st) {
  return st.spec.replicas > 1;
}

/// Nothing in flight, no gradient waiting, every step contributed to made.
bool drained(const pipeline_state& st) {
  return st.trainer->in_flight() == 0 && st.gradients.empty() && !st.awaiting_weight_half &&
         st.group.settled();
}

/// Whether the front input may go now.
bool front_ready(const pipeline_state& st) {
  if (st.inputs.empty())
    return false;
  if (const auto* c = std::get_if<control>(&st.inputs.front().item))
    // Epoch ends and the end of the stream carry the source's step count: a
    // replica that had no share of the last steps waits for them too.
    return drained(st) && (!replicated(st) || c->kind == control_kind::shutdown ||
                           st.group.applied() >= c->value);
  const auto& m = std::get<microbatch>(st.inputs.front().item);
  if (!st.spec.last && !st.downstream.can_send(m))
    return false;
  if (m.eval)
    return drained(st);
  if (st.spec.max_in_flight > 0 &&
      st.trainer->in_flight() >= static_cast<size_t>(st.spec.max_in_flight))
    return false;
  return !flush(st) || m.step == st.steps_done;
}

/// Several senders whose microbatches the repeatable orders (static 1f1b
/// and the flush schedules) take in id order.
bool merging(const pipeline_state& st) {
  return (static_order(st) || flush(st)) && st.spec.upstream_replicas > 1;
}

microbatch_position position_of(const microbatch& m) {
  return {m.step, m.index_in_step, m.step_size, m.eval};
}

/// Queues a microbatch for the schedule, noting the last training one.
void queue_input(pipeline_state& st, pipeline_state::input in) {
  const auto& m = std::get<microbatch>(in.item);
  if (!m.eval)
    st.last_queued = position_of(m);
  st.inputs.push_back(std::move(in));
}

/// Moves held microbatches to the inputs, lowest id first, while `may_go`.
template <typename Predicate>
void release_held(pipeline_state& st, Predicate may_go) {
  while (!st.held.empty()) {
    auto it = st.held.begin();
    const auto& m = std::get<microbatch>(it->second.item);
    if (!may_go(m))
      return;
    st.order.take(position_of(m));
    queue_input(st, std::move(it->second));
    st.held.erase(it);
  }
}

/// Queues an arrived microbatch: at once, or when merging, in the source's
/// order (input_order), so that the order does not depend on which
/// upstream replica was faster.
void admit(pipeline_state& st, pipeline_state::input in) {
  if (!merging(st))
    return queue_input(st, std::move(in));
  auto id = std::get<microbatch>(in.item).id;
  if (!st.held.emplace(id, std::move(in)).second)
    throw std::runtime_error("microbatch " + std::to_string(id) + " arrived twice");
  release_held(st, [&](const microbatch& m) { return st.order.ready(position_of(m)); });
}

/// Counts idle time between two pieces of training work as bubble.
void account(pipeline_state& st, clock_type::time_point start, bool training) {
  auto end = clock_type::now();
  st.work.add_busy(start);
  if (training && st.last_training_work)
    st.bubble_seconds += std::chrono::duration<double>(start - *st.last_training_work).count();
  if (training)
    st.last_training_work = end;
  else
    st.last_training_work.reset();
}

// -- replica groups ------------------------------------------------------------

/// Makes every group step whose contributions are all in, in step order.
void try_group_steps(pipeline_actor* self) {
  auto& st = self->state;
  for (;;) {
    auto since = clock_type::now();
    {
      compute_scope compute{st.work};
      // 1f1b: each loss was its microbatch's mean, so the group's mean.
      auto sum = st.group.next_step(!flush(st));
      if (!sum)
        return;
      st.trainer->step(*sum);
    }
    st.trace.record("step", since, clock_type::now(), -1, st.trainer->version());
    st.steps_done += 1;
    after_step(self, st.coordinator, st.name, *st.checkpoints, st.trainer->version(),
               st.counters, [&] { return st.trainer->save_state(); });
  }
}

/// Sends this replica's sum of every step whose share it has done to its
/// peers, in step order (a step it has no share of contributes zeros).
void contribute_ready(pipeline_actor* self) {
  auto& st = self->state;
  auto zeros = [&] { return st.trainer->take_gradients(); };
  while (auto c = st.group.next_contribution(zeros))
    for (int32_t r = 0; r < st.spec.replicas; ++r)
      if (r != st.spec.replica)
        self->send(st.peers.at(r), tensor_set{"gradients", st.name, st.spec.replica, c->step,
                                              c->step_size, c->sum, {}});
}

/// A replicated stage's backward: its gradients go to its step's sum.
void after_replica_backward(pipeline_actor* self, const in_flight_entry& e) {
  auto& st = self->state;
  {
    compute_scope compute{st.work};
    st.group.add_backward(e.step, e.step_size, st.trainer->take_gradients());
  }
  contribute_ready(self);
  try_group_steps(self);
}

void on_peer_gradients(pipeline_actor* self, tensor_set& t) {
  auto& st = self->state;
  st.group.add_peer(t.replica, t.step, t.step_size, std::move(t.tensors));
  contribute_ready(self);
  try_group_steps(self);
}

// -- forward and backward ----------------------------------------------------------

/// Counts a finished backward; steps when the schedule says so.
void after_backward(pipeline_actor* self, int64_t id) {
  auto& st = self->state;
  auto e = st.in_flight.at(id);
  st.in_flight.erase(id);
  if (replicated(st))
    return after_replica_backward(self, e);
  if (flush(st) && ++st.backwards_in_step < e.step_size)
    return;
  auto since = clock_type::now();
  {
    compute_scope compute{st.work};
    st.trainer->step();
  }
  st.trace.record("step", since, clock_type::now(), -1, st.trainer->version());
  st.backwards_in_step = 0;
  st.steps_done += 1;
  after_step(self, st.coordinator, st.name, *st.checkpoints, st.trainer->version(), st.counters,
             [&] { return st.trainer->save_state(); });
}

void send_backward(pipeline_actor* self, const caf::actor& to, gradient g) {
  auto& st = self->state;
  auto sent = clock_type::now();
  auto id = g.microbatch_id;
  st.backward_edge.messages += 1;
  if (g.value.defined())
    st.backward_edge.bytes += static_cast<int64_t>(g.value.nbytes());
  for (const auto& w : g.weight_gradients)
    st.backward_edge.bytes += static_cast<int64_t>(w.nbytes());
  self->send(to, std::move(g));
  st.trace.record("send", sent, clock_type::now(), id, -1);
}

/// Sends the input gradient of `id` upstream; with takes_weight_gradient,
/// then the weight half of the previous stage's last layer in a second
/// message, computed while the previous stage runs its own backward.
void send_gradient(pipeline_actor* self, int64_t id, int64_t step, int64_t version,
                   model::backward_result& r) {
  auto& st = self->state;
  const auto& to = st.in_flight.at(id).sender;
  send_backward(self, to, gradient{id, step, version, r.input_gradient, {}, {}});
  if (!st.spec.takes_weight_gradient)
    return;
  auto since = clock_type::now();
  std::vector<at::Tensor> half;
  {
    compute_scope compute{st.work};
    half = st.trainer->previous_weight_gradients(r);
  }
  st.trace.record("weight_half", since, clock_type::now(), id, r.backward_version);
  send_backward(self, to, gradient{id, step, version, {}, std::move(half), {}});
}

/// After the backward of `id`: with hands_on_weight_gradient, adds its
/// weight half, or waits for it; then steps or contributes (after_backward).
void finish_backward(pipeline_actor* self, int64_t id) {
  auto& st = self->state;
  if (st.spec.hands_on_weight_gradient) {
    auto half = st.weight_halves.find(id);
    if (half == st.weight_halves.end()) {
      st.awaiting_weight_half = id;
      return;
    }
    {
      compute_scope compute{st.work};
      st.trainer->add_last_weight_gradients(half->second);
    }
    st.weight_halves.erase(half);
    st.awaiting_weight_half.reset();
  }
  after_backward(self, id);
}

/// The last stage's progress line (progress_pace.hpp says when): after a
/// training step, and at the epoch's first evaluation microbatch, where its
/// training ended.
void maybe_report_progress(pipeline_actor* self, const microbatch& m, double loss) {
  auto& st = self->state;
  const bool due = m.eval ? st.progress.ended(m.epoch)
                          : m.index_in_step == m.step_size - 1 &&
                              st.progress.due(m.epoch, 1, st.spec.progress_every);
  if (due)
    self->send(st.coordinator,
               messages::progress{st.name, m.epoch, st.counters.samples_total, loss, {}});
}

/// The version a training forward uses: the input stage's under vertical sync.
int64_t forward_version(const pipeline_state& st, const microbatch& m) {
  return st.spec.vertical_sync && !st.spec.first ? m.weight_version : -1;
}

/// The last stage: forward, loss and backward in one go (or evaluation).
void last_stage(pipeline_actor* self, microbatch& m, clock_type::time_point since) {
  auto& st = self->state;
  const auto* labels = task_labels_of(m, st.spec.task);
  if (labels == nullptr)
    throw std::runtime_error("microbatch " + std::to_string(m.id) +
                             " carries no labels for task '" + st.spec.task + "'");
  auto batch = m.payload.size(0);
  if (m.eval) {
    const auto& e = st.counters.epoch;
    maybe_report_progress(self, m, e.samples ? e.loss_sum / e.samples : 0.0);
    compute_scope compute{st.work};
    auto logits = st.trainer->infer(m.payload);
    st.counters.epoch.add_evaluation(
      m.validation, logits.argmax(1).eq(*labels).sum().item<int64_t>(), batch);
    st.trace.record("eval", since, clock_type::now(), m.id, st.trainer->version());
    return;
  }
  auto forwarded = since;
  model::backward_result r;
  {
    compute_scope compute{st.work};
    model::boundary_io boundary{std::move(m.boundary_input), {}};
    st.trainer->forward(m.id, m.payload, st.spec.first, forward_version(st, m), &boundary);
    forwarded = clock_type::now();
    r = st.trainer->backward_loss(m.id, *labels, flush(st) ? m.step_size : 1);
  }
  st.trace.record("forward", since, forwarded, m.id, r.forward_version);
  st.trace.record("backward", forwarded, clock_type::now(), m.id, r.backward_version);
  st.counters.epoch.loss_sum += r.loss * batch;
  st.counters.epoch.samples += batch;
  st.counters.samples_total += batch;
  if (!st.spec.first)
    send_gradient(self, m.id, m.step, m.weight_version, r);
  after_backward(self, m.id);
  maybe_report_progress(self, m, r.loss);
}

void forward_one(pipeline_actor* self, microbatch m, const caf::actor& sender) {
  auto& st = self->state;
  auto since = clock_type::now();
  self->send(sender, messages::credit{m.id, 1, {}});
  if (st.spec.first)
    m.weight_version = st.trainer->version();
  if (!m.eval) {
    st.counters.admit(m.id, m.step); // new: drop_duplicates() ran before
    maybe_throw_fault(st.checkpoints->spec(), m);
    st.in_flight[m.id] = {sender, m.step, m.step_size};
    st.last_forward = position_of(m);
  }
  if (st.spec.last)
    return last_stage(self, m, since);
  if (m.eval) {
    compute_scope compute{st.work};
    m.payload = st.trainer->infer(m.payload);
    st.trace.record("eval", since, clock_type::now(), m.id, st.trainer->version());
  } else {
    compute_scope compute{st.work};
    auto version = forward_version(st, m);
    model::boundary_io boundary{std::move(m.boundary_input), {}};
    m.payload = st.trainer->forward(m.id, m.payload, st.spec.first, version, &boundary);
    m.boundary_input = std::move(boundary.last_input); // weight_gradient: next
    st.trace.record("forward", since, clock_type::now(), m.id,
                    version < 0 ? st.trainer->version() : version);
  }
  auto sent = clock_type::now();
  auto step = m.step;
  auto id = m.id;
  st.downstream.send(self, std::move(m));
  if (st.downstream.dropped_last())
    self->send(st.coordinator, fault_atom::value, std::string{"dropped"}, st.name, step);
  st.trace.record("send", sent, clock_type::now(), id, -1);
}

void backward_one(pipeline_actor* self, gradient g) {
  auto& st = self->state;
  auto since = clock_type::now();
  model::backward_result r;
  {
    compute_scope compute{st.work};
    r = st.trainer->backward(g.microbatch_id, g.value);
  }
  st.trace.record("backward", since, clock_type::now(), g.microbatch_id, r.backward_version);
  if (!st.spec.first)
    send_gradient(self, g.microbatch_id, g.step, g.weight_version, r);
  finish_backward(self, g.microbatch_id);
}

// -- reports and controls ------------------------------------------------------------

messages::actor_report make_report(pipeline_state& st) {
  auto r = activity_report(st.name, "pipeline_stage", st.node, st.work);
  r.task = st.spec.last ? st.spec.task : "";
  r.bubble_seconds = st.bubble_seconds;
  report_counters(st.counters, r);
  r.weights_digest = model::weights_digest(st.trainer->layers());
  r.edges = st.downstream.edges();
  if (!st.spec.first)
    r.edges.push_back(st.backward_edge);
  return r;
}

/// The stage's weights and buffers (layered_model::state()), for a
/// checkpoint of the whole model.
tensor_set weights_of(const pipeline_state& st) {
  tensor_set w{"weights", st.name, st.spec.replica, st.trainer->version(), 0, {}, {}};
  for (const auto& p : st.trainer->layers().state())
    w.tensors.push_back(p.detach());
  return w;
}

void on_control(pipeline_actor* self, const control& c) {
  auto& st = self->state;
  if (!st.spec.last)
    st.downstream.broadcast(self, c);
  // Drained at a control: every step of the epoch is applied.
  if (c.kind == control_kind::epoch_end && st.spec.replica == 0)
    send_epoch_weights(self, st.coordinator, st.spec.recovery, st.name, 0, c.epoch,
                       st.trainer->layers().state());
  if (c.kind == control_kind::epoch_end && st.spec.last) {
    close_epoch(self, st.coordinator, st.counters, c.epoch, [&] { return make_report(st); });
  } else if (c.kind == control_kind::end_of_stream) {
    report_trained(self, st.coordinator, st.name, st.counters);
    if (st.spec.replica == 0)
      send_in_parts(self, st.coordinator, weights_of(st));
    auto report = make_report(st);
    report.trace = st.trace.take();
    self->send(st.coordinator, final_atom::value, std::move(report));
  }
}

/// Drops the training microbatches at the front of the inputs that this
/// stage has already trained (replayed after a restart), returning their
/// credit. Counted when trained, not when received: a checkpoint must not
/// count microbatches that were only queued.
void drop_duplicates(pipeline_actor* self) {
  auto& st = self->state;
  // 1f1b steps per microbatch, not per minibatch, and never restarts.
  while (flush(st) && !st.inputs.empty()) {
    const auto* m = std::get_if<microbatch>(&st.inputs.front().item);
    if (m == nullptr || m->eval || !st.counters.trained_before(m->id, m->step, st.steps_done))
      return;
    st.counters.duplicates += 1;
    self->send(st.inputs.front().sender, messages::credit{m->id, 1, {}});
    st.inputs.pop_front();
  }
}

/// What a stage does next: a backward, the front input, or nothing (wait).
enum class operation { wait, backward, input };

bool training_input(const pipeline_state::input& in) {
  const auto* m = std::get_if<microbatch>(&in.item);
  return m != nullptr && !m->eval;
}

/// The gradient of the oldest microbatch in flight, or end(): a static order
/// takes backwards in forward order (gradients of replicated receivers
/// arrive in any order).
std::deque<gradient>::const_iterator oldest_gradient(const pipeline_state& st) {
  if (st.in_flight.empty())
    return st.gradients.end();
  auto oldest = st.in_flight.begin()->first;
  return std::find_if(st.gradients.begin(), st.gradients.end(),
                      [&](const gradient& g) { return g.microbatch_id == oldest; });
}

/// The gradient the next backward takes: the oldest microbatch's under the
/// repeatable orders (static 1f1b, and the flush schedules, whose step then
/// adds the microbatches' gradients in forward order whichever receiver
/// replica answered first), the first to arrive under 1f1b-dynamic; end()
/// when none may go.
std::deque<gradient>::const_iterator next_gradient(const pipeline_state& st) {
  return st.spec.schedule == "1f1b-dynamic" ? st.gradients.begin() : oldest_gradient(st);
}

/// The dynamic orders: a waiting backward first (gpipe: a ready forward
/// first), otherwise the front input when it may go.
operation dynamic_next(const pipeline_state& st) {
  bool forward_first = st.spec.schedule == "gpipe" && front_ready(st);
  if (next_gradient(st) != st.gradients.end() && !forward_first)
    return operation::backward;
  return front_ready(st) ? operation::input : operation::wait;
}

/// Whether this stage has forwarded its whole share of the training before
/// the next drain point (drain_atom), so that a backward comes next.
bool at_drain(const pipeline_state& st) {
  if (!st.last_forward || st.drain_step < 0)
    return false;
  const auto& p = *st.last_forward;
  bool last_of_share = p.index_in_step + st.spec.replicas >= p.step_size;
  // Only an epoch's last step may be too short to give this replica a share.
  return last_of_share && (p.step == st.drain_step ||
                           (p.step + 1 == st.drain_step && st.order.share_of(st.drain_size) == 0));
}

/// PipeDream's static 1F1B order: a forward while fewer than NOAM
/// microbatches are in flight and the next input is a training microbatch
/// (the warm-up forwards, then one after each backward), otherwise a
/// backward (the NOAM is full, or an evaluation or control comes next: the
/// cool-down). The stage waits for the input, credit or gradient its next
/// operation needs instead of doing another one, so the order of forwards
/// and backwards, and with it the weight version of every forward, is a
/// function of the input order alone, not of timing.
operation static_next(const pipeline_state& st) {
  bool room = st.spec.max_in_flight == 0 ||
              st.trainer->in_flight() < static_cast<size_t>(st.spec.max_in_flight);
  if (room && st.inputs.empty() && !at_drain(st))
    return operation::wait; // a forward comes next: wait for it
  // A replica takes no forward between its contribution to a group step
  // and that step (as DDP's backward waits for its all-reduce): each
  // forward's version counts the group steps before it in its own order.
  if (room && !st.inputs.empty() && training_input(st.inputs.front()))
    return front_ready(st) && st.group.settled() ? operation::input : operation::wait;
  if (st.trainer->in_flight() > 0)
    return oldest_gradient(st) == st.gradients.end() ? operation::wait : operation::backward;
  return front_ready(st) ? operation::input : operation::wait;
}

/// Learns that training ends with `step` before the next drain point, and
/// tells the downstream stages and the replica's peers once.
void learn_drain(pipeline_actor* self, int64_t step, int32_t size) {
  auto& st = self->state;
  if (step <= st.drain_step)
    return;
  st.drain_step = step;
  st.drain_size = size;
  for (const auto& r : st.receivers)
    self->send(r, drain_atom::value, step, size);
  for (const auto& peer : st.peers)
    if (peer)
      self->send(peer, drain_atom::value, step, size);
}

/// Replica 0 (which gets every step's first microbatch and every
/// evaluation) sees a drain point at the front of its inputs: the training
/// before it ended with the last training microbatch it queued.
void notice_drain(pipeline_actor* self) {
  auto& st = self->state;
  if (!static_order(st) || st.spec.replica != 0 || st.inputs.empty() || !st.last_queued ||
      training_input(st.inputs.front()))
    return;
  learn_drain(self, st.last_queued->step, st.last_queued->step_size);
}

/// Does whatever the schedule allows, until nothing can go.
void act(pipeline_actor* self) {
  auto& st = self->state;
  for (;;) {
    if (st.awaiting_weight_half)
      return; // its step or replica sum comes first
    drop_duplicates(self);
    notice_drain(self);
    auto next = static_order(st) ? static_next(st) : dynamic_next(st);
    auto since = clock_type::now();
    if (next == operation::backward) {
      auto it = next_gradient(st);
      gradient g = *it; // shares its tensor
      st.gradients.erase(it);
      use_thread_budget(st.spec.threads);
      backward_one(self, std::move(g));
      account(st, since, true);
    } else if (next == operation::input) {
      auto input = std::move(st.inputs.front());
      st.inputs.pop_front();
      if (auto* c = std::get_if<control>(&input.item)) {
        on_control(self, *c);
        continue;
      }
      use_thread_budget(st.spec.threads);
      auto& m = std::get<microbatch>(input.item);
      bool training = !m.eval;
      forward_one(self, std::move(m), input.sender);
      account(st, since, training);
    } else {
      return;
    }
  }
}

/// A control is queued once every upstream replica sent its copy: then every
/// microbatch before it, from each of them, has arrived.
void on_control_copy(pipeline_actor* self, control c) {
  auto& st = self->state;
  auto key = std::make_pair(static_cast<int>(c.kind), c.epoch);
  if (++st.control_copies[key] < st.spec.upstream_replicas)
    return;
  st.control_copies.erase(key);
  // Every microbatch before the control has arrived: the held ones of its
  // epoch go first (end of stream and shutdown: all of them).
  if (merging(st))
    release_held(st, [&](const microbatch& m) {
      return c.kind != control_kind::epoch_end || m.epoch <= c.epoch;
    });
  st.inputs.push_back({std::move(c), nullptr});
}

struct pipeline_setup {
  std::string name;
  std::string node;
  stage_settings spec;
  std::shared_ptr<model::stage_trainer> trainer;
  training_counters counters; ///< restored from the checkpoint, or zero
};

/// The state a stage starts with: its settings, its trainer (restored or
/// fresh) and what follows from them.
void init_state(pipeline_actor* self, pipeline_setup setup) {
  auto& init = self->state;
  init.name = std::move(setup.name);
  init.node = std::move(setup.node);
  init.spec = std::move(setup.spec);
  init.trainer = std::move(setup.trainer);
  init.trace = trace_recorder{init.spec.trace};
  init.counters = std::move(setup.counters);
  init.checkpoints.emplace(init.spec.recovery);
  init.order = input_order{init.spec.replica, init.spec.replicas};
  // A restored stage continues after the step of its checkpoint.
  init.steps_done = init.trainer->version();
  init.group = replica_group{init.spec.replica, init.spec.replicas, init.trainer->version()};
  init.peers.resize(static_cast<size_t>(init.spec.replicas));
  init.backward_edge = {init.name, "upstream", 0, 0};
}

/// A replica's peer sent its gradients (a replicated stage sums them).
void on_peer_tensors(pipeline_actor* self, tensor_set& t) {
  auto& st = self->state;
  if (t.invalid || t.kind != "gradients" || !replicated(st) || t.replica < 0 ||
      t.replica >= st.spec.replicas || t.replica == st.spec.replica ||
      t.tensors.size() != st.trainer->layers().parameters().size())
    return fail(self, st.coordinator, st.name,
                "refused gradients from '" + t.from + "' it cannot use" +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  guarded(self, "replica gradients", [=, &t] {
    auto since = clock_type::now();
    on_peer_gradients(self, t); // may step: busy, not bubble
    self->state.work.add_busy(since);
    act(self);
  });
}

/// weight_gradient: next — the next stage's weight half of `g`'s
/// microbatch (a gradient without a value): kept until its backward here
/// ran, or finishing the backward that waits for it.
void on_weight_half(pipeline_actor* self, gradient g) {
  auto& st = self->state;
  auto id = g.microbatch_id;
  if (!st.spec.hands_on_weight_gradient || g.value.defined() || st.weight_halves.count(id))
    return fail(self, st.coordinator, st.name,
                "refused weight gradients of microbatch " + std::to_string(id) +
                  " it cannot use");
  st.weight_halves.emplace(id, std::move(g.weight_gradients));
  if (st.awaiting_weight_half != id)
    return;
  guarded(self, "backward", [=] {
    auto& st = self->state;
    auto since = clock_type::now();
    finish_backward(self, id);
    account(st, since, true);
    act(self);
  });
}

/// A replica learns peer number `replica` of its group.
caf::result<caf::ok_atom> on_peer(pipeline_actor* self, const caf::actor& peer, int32_t replica) {
  auto& st = self->state;
  if (replica < 0 || replica >= st.spec.replicas || replica == st.spec.replica)
    return make_error(errc::bad_config, st.name + ": no replica " + std::to_string(replica) +
                                          " in a group of " + std::to_string(st.spec.replicas));
  st.peers[static_cast<size_t>(replica)] = peer;
  return caf::ok_atom::value;
}

caf::behavior pipeline_behavior(pipeline_actor* self, pipeline_setup setup) {
  init_state(self, std::move(setup));
  caf::message_handler own{
    observe_coordinator(self),
    [=](fault_atom, const std::string& kind) {
      auto& st = self->state;
      fail(self, st.coordinator, st.name, "injected fault: " + kind);
    },
    [=](group_atom, const caf::actor& peer, int32_t replica) {
      return on_peer(self, peer, replica);
    },
    [=](microbatch& m) {
      auto& st = self->state;
      if (m.invalid)
        return fail(self, st.coordinator, st.name, "refused a microbatch: " + describe(m.invalid));
      st.work.begin();
      guarded(self, "forward", [=, &m] {
        auto& st = self->state;
        if (st.spec.vertical_sync && !st.spec.first && !m.eval)
          st.trainer->retain_from(m.weight_version);
        admit(st, {std::move(m), sender_of(self)});
        act(self);
      });
    },
    [=](control& c) {
      if (c.invalid)
        return fail(self, self->state.coordinator, self->state.name,
                    "refused a control message: " + describe(c.invalid));
      on_control_copy(self, std::move(c));
      guarded(self, "control", [=] { act(self); });
    },
    [=](gradient& g) {
      auto& st = self->state;
      if (g.invalid || st.spec.last || st.in_flight.count(g.microbatch_id) == 0)
        return fail(self, st.coordinator, st.name, "refused a gradient it cannot use");
      if (!g.weight_gradients.empty())
        return on_weight_half(self, std::move(g));
      st.gradients.push_back(std::move(g));
      guarded(self, "backward", [=] { act(self); });
    },
    [=](tensor_set& t) { on_peer_tensors(self, t); },
    [=](drain_atom, int64_t step, int32_t size) {
      learn_drain(self, step, size);
      guarded(self, "drain", [=] { act(self); });
    },
  };
  // Notes each receiver for drain notices, then lets the sender's handler add it.
  caf::message_handler receivers{
    [=](connect_atom, const caf::actor& downstream, const std::string& name) {
      auto& st = self->state;
      st.receivers.push_back(downstream);
      st.downstream.add(downstream, st.name, name, st.spec.window);
      return caf::ok_atom::value;
    },
  };
  return receivers.or_else(
    sender_handlers(self, [=] { guarded(self, "forward", [=] { act(self); }); }).or_else(own));
}

} // namespace

caf::expected<caf::actor> spawn_stage(caf::actor_system& sys, const std::string& name,
                                      const std::string& node,
                                      const stage_settings& spec) {
  try {
    auto whole = model::make_pretrain_model(spec.backbone, spec.classes);
    if (static_cast<size_t>(spec.end) > whole.size())
      return make_error(errc::bad_config, name + ": layers [" + std::to_string(spec.begin) +
                                            ", " + std::to_string(spec.end) + ") exceed the " +
                                            std::to_string(whole.size()) + " layers");
    const std::vector<size_t> cuts{static_cast<size_t>(spec.begin),
                                   static_cast<size_t>(spec.end)};
    if (const auto* tie = model::separated_tie(model::layer_ties(whole), cuts))
      return make_error(errc::bad_config, name + ": layers [" + std::to_string(spec.begin) +
                                            ", " + std::to_string(spec.end) + ") would split " +
                                            tie->reason() +
                                            "; a pipeline trains a parameter in one stage");
    if (!spec.checkpoint.empty())
      model::load_pretrained_backbone(whole, spec.checkpoint);
    // Every schedule stashes: under flush schedules all forwards of a
    // minibatch use one version anyway, so stashing costs nothing there.
    auto trainer = std::make_shared<model::stage_trainer>(
      whole.slice(spec.begin, spec.end), spec.optimizer, model::stash_mode::stash);
    if (spec.steps_per_epoch > 0)
      trainer->set_schedule(spec.steps_per_epoch, spec.epochs);
    if (spec.hands_on_weight_gradient)
      trainer->hand_on_weight_gradient();
    if (spec.takes_weight_gradient)
      trainer->take_weight_gradient(whole.layers()[static_cast<size_t>(spec.begin) - 1]);
    training_counters counters;
    if (auto restored = checkpointing{spec.recovery}.restore()) {
      trainer->restore(*restored);
      counters = training_counters::from_json(restored->counters);
    }
    return spawn_detached(sys, name, pipeline_behavior,
                          pipeline_setup{name, node, spec, std::move(trainer),
                                         std::move(counters)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::error check_paths(const stage_settings& spec, const path_roots& roots) {
  // A trainable actor writes its checkpoints there and restores from them.
  if (auto err = check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots))
    return err;
  if (auto err = check_checkpoint_path(spec.checkpoint, "checkpoint", roots))
    return err;
  return check_checkpoint_path(spec.backbone.path, "TorchScript file", roots);
}

caf::expected<caf::actor> spawn_stage_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<stage_settings>(sys, args, parse_stage_settings, check_paths,
                                           spawn_stage);
}

} // namespace pipeline
} // namespace modes
} // namespace baton::actors
