#include "actors/modes/data_parallel/worker.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>
#include <caf/all.hpp>
#include <torch/torch.h>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/progress_pace.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "actors/modes/data_parallel/ps_exchange.hpp"
#include "actors/modes/data_parallel/ring_exchange.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker_replica.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/source.hpp"
#include "actors/roles/training_counters.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/core/freezing.hpp"
#include "model/core/specs.hpp"
#include "model/core/stage_trainer.hpp"
#include "model/data_parallel/data_parallel.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

using messages::tensor_set;

/// What a worker starts with: its settings, data and model.
struct worker_setup {
  std::string name;
  std::string node;
  worker_settings spec;
  model::data_splits data;
  model::layered_model model;
  /// Its checkpoint of spec.recovery.restore_step (none for 0).
  std::optional<model::training_state> restored;
};

struct worker_state {
  std::string name;
  std::string node;
  worker_settings spec;
  caf::actor coordinator;
  caf::actor next; ///< the ring's successor (null when W = 1)

  // -- the replica, its optimizer, frozen prefix and cache ------------------------
  std::optional<worker_replica> replica;
  model::lr_schedule schedule;
  int64_t steps_per_epoch = 0;

  // -- data and progress ----------------------------------------------------------
  model::dataset train;
  model::dataset test;
  model::dataset validation; ///< empty without data.validation
  std::vector<std::vector<int64_t>> minibatches; ///< this epoch's share, cut
  int32_t epoch = 0;
  size_t in_epoch = 0; ///< the epoch's next minibatch
  int64_t step = 0;    ///< global steps taken
  bool started = false;
  bool exchanging = false; ///< the ring carries a step's gradients or local SGD's weights
  bool averaging = false;  ///< local SGD: the ring carries the weights
  int32_t local_steps = 0; ///< local SGD: steps since the last average
  bool finished = false;
  std::optional<ring_exchange> ring;
  std::deque<tensor_set> inbox; ///< the predecessor's chunks, in arrival (= send) order
  /// Two workers of one process train one set of weights (share_weights),
  /// each stepping a half of it with both gradients as autograd left them
  /// (no bucket, no ring: own_grads, other_grads); a step begins once the
  /// other's half of the step before is in (other_stepped: the steps it has
  /// finished).
  bool halves = false;
  int64_t other_stepped = 0;
  std::vector<at::Tensor> own_grads;
  std::optional<std::vector<at::Tensor>> other_grads;
  /// The weights this worker left for the other to take (the table that
  /// holds them for it lets them go with this worker).
  std::shared_ptr<std::vector<at::Tensor>> left;

  // -- exchange: ps (ps_exchange.hpp) ---------------------------------------------
  std::vector<caf::actor> shards;                ///< by shard index (peer edges)
  std::optional<ps_exchange> ps;
  std::vector<messages::edge_stats> shard_edges; ///< to each shard: its pushes

  training_counters counters; ///< checkpointed at global steps (exactly-once counts)
  std::optional<checkpointing> checkpoints;
  int64_t noted = 0; ///< the last step whose beginning was checkpointed and told
  activity work;
  messages::edge_stats ring_edge;
  progress_pace progress;
  /// Since when it waits for the exchange (set when advance() returns for
  /// it), and the seconds it waited in all.
  std::optional<activity::clock::time_point> waiting_since;
  double exchange_wait = 0;
  /// Seconds from a step's first bucket on the ring to its backward's end:
  /// the exchange alongside the backward (overlap).
  double overlap = 0;
  /// Seconds spent evaluating at the epochs' ends (training time too).
  double evaluate_seconds = 0;
};

using worker_actor = caf::stateful_actor<worker_state>;

bool lead(const worker_state& st) {
  return st.spec.worker == 0;
}

void begin_epoch(worker_state& st) {
  const auto& plan = st.spec.data.plan;
  st.minibatches = model::worker_minibatches(
    model::worker_share(st.train.size(), plan.seed, st.epoch, st.spec.worker, st.spec.workers,
                        model::remainder_policy::pad),
    plan.batch_size);
  st.in_epoch = 0;
}

/// Forward and backward of the next minibatch (mean loss), as the local
/// reference computes a worker's gradient (the frozen prefix forward only,
/// through the cache); leaves no gradient in the model. `on_bucket`: see
/// worker_replica::gradients.
std::vector<at::Tensor> gradients_of_next(worker_state& st,
                                          const worker_replica::bucket_ready& on_bucket = {}) {
  const auto& ids = st.minibatches[st.in_epoch];
  double loss = 0;
  auto grads = on_bucket ? st.replica->gradients(st.train, ids, st.epoch, loss, on_bucket)
                         : st.replica->gradients(st.train, ids, st.epoch, loss);
  auto batch = static_cast<int64_t>(ids.size());
  st.counters.admit(st.step * st.spec.workers + st.spec.worker, st.step);
  st.counters.epoch.loss_sum += loss * static_cast<double>(batch);
  st.counters.epoch.samples += batch;
  st.counters.samples_total += batch;
  return grads;
}

/// The lr of the step under way (every worker computes the same).
double current_lr(const worker_state& st) {
  return model::scheduled_lr(st.schedule, st.step, st.steps_per_epoch);
}

void send_round(worker_actor* self, const ring_message& m) {
  auto& st = self->state;
  st.ring_edge.messages += 1;
  st.ring_edge.bytes += static_cast<int64_t>(m.chunk.nbytes());
  self->send(st.next, tensor_set{"ring", st.name, st.spec.worker, st.step, m.round,
                                 {m.chunk}, {}});
}

/// Step st.step is about to begin, every exchange of the steps before it
/// over (an epoch's end included): a consistent cut of the job. Writes the
/// checkpoint when due and tells the coordinator of the step (once per
/// step; a restored worker starts past its restore step's), then fires a
/// `throw` fault set for this step.
void begin_global_step(worker_actor* self) {
  auto& st = self->state;
  if (st.step > st.noted) {
    st.noted = st.step;
    after_step(self, st.coordinator, st.name, *st.checkpoints, st.step, st.counters,
               [&] { return st.replica->save_state(st.step); });
  }
  if (st.step == st.spec.recovery.throw_at_step)
    throw std::runtime_error("injected fault: throw before step " + std::to_string(st.step));
}

void send_rounds(worker_actor* self, const std::vector<ring_message>& messages) {
  for (const auto& m : messages)
    send_round(self, m);
}

/// The pair's step (share_weights): this worker's gradients, handed to the
/// other as autograd left them (the tensors themselves: one process).
void begin_pair_step(worker_actor* self) {
  auto& st = self->state;
  st.exchanging = true;
  {
    compute_scope compute{st.work};
    st.own_grads = gradients_of_next(st);
  }
  st.ring_edge.messages += 1;
  for (const auto& g : st.own_grads)
    st.ring_edge.bytes += g.defined() ? static_cast<int64_t>(g.nbytes()) : 0;
  self->send(st.next,
             tensor_set{"gradients", st.name, st.spec.worker, st.step, 0, st.own_grads, {}});
}

/// Computes the step's gradients and puts their buckets on the ring: each
/// as the backward finishes it (overlap), or all after the backward.
void begin_step(worker_actor* self) {
  auto& st = self->state;
  if (st.halves)
    return begin_pair_step(self);
  st.ring->start(st.replica->bucket_sizes());
  st.exchanging = true;
  compute_scope compute{st.work};
  if (!st.spec.overlap) {
    auto flats = st.replica->bucket_vectors(gradients_of_next(st));
    for (size_t b = 0; b < flats.size(); ++b)
      send_rounds(self, st.ring->put(b, std::move(flats[b])));
    return;
  }
  std::optional<activity::clock::time_point> first_put;
  gradients_of_next(st, [&](size_t b, at::Tensor flat) {
    if (!first_put)
      first_put = activity::clock::now();
    send_rounds(self, st.ring->put(b, std::move(flat)));
  });
  // The exchange ran alongside the backward from its first bucket on.
  if (first_put)
    st.overlap += std::chrono::duration<double>(activity::clock::now() - *first_put).count();
}

/// Applies the predecessor's chunks of this step that have arrived.
void apply_arrived(worker_actor* self) {
  auto& st = self->state;
  while (!st.ring->done() && !st.inbox.empty()) {
    auto t = std::move(st.inbox.front());
    st.inbox.pop_front();
    if (t.step != st.step)
      throw model::error("ring: " + t.from + " sent a chunk of step " + std::to_string(t.step) +
                         " during step " + std::to_string(st.step));
    send_rounds(self, st.ring->receive({t.step_size, std::move(t.tensors.front())}));
  }
}

/// The all-reduced gradients divided by W, then one SGD step of every
/// trainable parameter with the scheduled lr (the reference's sgd_update),
/// then the adaptive freezing decision when one is due. Two workers' mean
/// is taken in the step's own pass where the step allows.
void finish_step(worker_actor* self) {
  auto& st = self->state;
  {
    compute_scope compute{st.work};
    if (st.ring->swaps() && st.replica->steps_of_mean()) {
      st.replica->step_of_mean(st.ring->own(), st.ring->others(), current_lr(st));
    } else {
      const auto reduced = st.replica->per_key(st.ring->means());
      st.replica->step(reduced, current_lr(st));
      if (auto decision = st.replica->adapt(st.step, reduced))
        log_decision(st.name, *decision); // every worker logs the same at the same step
    }
    st.ring->release();
  }
  st.step += 1;
  st.in_epoch += 1;
  st.exchanging = false;
}

/// The pair's step once both gradients are here: this worker's half of
/// every key stepped with their mean, then the other told (its weights too:
/// it begins its next step once this is in).
void finish_pair_step(worker_actor* self) {
  auto& st = self->state;
  {
    compute_scope compute{st.work};
    st.replica->step_of_two(st.own_grads, *st.other_grads, current_lr(st), st.spec.worker, 2);
  }
  st.own_grads.clear();
  st.other_grads.reset();
  self->send(st.next, tensor_set{"stepped", st.name, st.spec.worker, st.step, 0, {}, {}});
  st.step += 1;
  st.in_epoch += 1;
  st.exchanging = false;
}

// -- local SGD (sync_every: L) -----------------------------------------------------

/// Puts the trainable weights on the ring, to be averaged.
void begin_average(worker_actor* self) {
  auto& st = self->state;
  std::vector<at::Tensor> flats;
  {
    compute_scope compute{st.work};
    flats = st.replica->bucket_vectors(st.replica->parameters());
  }
  st.local_steps = 0;
  st.exchanging = true;
  st.averaging = true;
  send_rounds(self, st.ring->begin(std::move(flats)));
}

/// The summed weights divided by W replace the trainable weights; momentum
/// stays this worker's.
void finish_average(worker_actor* self) {
  auto& st = self->state;
  compute_scope compute{st.work};
  st.replica->set_parameters(st.replica->per_key(st.ring->means()));
  st.ring->release();
  st.exchanging = false;
  st.averaging = false;
}

/// A local step: this worker's own gradient, its own SGD step; the weights
/// go on the ring after every L of them.
void local_step(worker_actor* self) {
  auto& st = self->state;
  {
    compute_scope compute{st.work};
    st.replica->step(gradients_of_next(st), current_lr(st));
  }
  st.step += 1;
  st.in_epoch += 1;
  if (++st.local_steps == st.spec.sync_every)
    begin_average(self);
}

/// Worker 0's progress line (progress_pace.hpp says when).
void report_progress(worker_actor* self) {
  auto& st = self->state;
  auto& e = st.counters.epoch;
  self->send(st.coordinator, messages::progress{st.name, st.epoch, st.counters.samples_total,
                                                e.samples ? e.loss_sum / e.samples : 0.0, {}});
}

void maybe_report_progress(worker_actor* self) {
  auto& st = self->state;
  if (lead(st) && st.progress.due(st.epoch, 1, st.spec.progress_every))
    report_progress(self);
}

// -- epochs and reports ----------------------------------------------------------------

/// Whether every worker evaluates a share of the test and validation
/// batches at an epoch's end (else worker 0 evaluates them all): only
/// where the workers then hold the same weights and buffers, a synchronous
/// ring over a model without buffers (batch norm's running statistics are
/// each worker's own, and the reference evaluates worker 0's).
bool shares_evaluation(const worker_state& st) {
  return st.spec.workers > 1 && st.spec.exchange == "ring" && st.spec.sync_every == 0 &&
         st.replica->model().buffers().empty();
}

/// Test and validation accuracy counts, as the reference evaluates
/// (evaluation mode, then the freeze point's modes again): this worker's
/// share of the batches, or all of them on worker 0; the coordinator pools
/// the shares (merge_replica_reports).
void evaluate(worker_state& st) {
  const bool shared = shares_evaluation(st);
  const int32_t part = shared ? st.spec.worker : 0;
  const int32_t parts = shared ? st.spec.workers : 1;
  auto test = st.replica->share_correct(st.test, st.spec.eval_batch, part, parts);
  st.counters.epoch.add_evaluation(false, test.correct, test.evaluated);
  if (st.validation.size() == 0)
    return;
  auto validation = st.replica->share_correct(st.validation, st.spec.eval_batch, part, parts);
  st.counters.epoch.add_evaluation(true, validation.correct, validation.evaluated);
}

messages::actor_report make_report(worker_state& st) {
  auto r = activity_report(st.name, "data_parallel_worker", st.node, st.work);
  r.task = st.spec.task.name;
  report_counters(st.counters, r);
  r.weights_digest = model::weights_digest(st.replica->model());
  report_freezing(*st.replica, r);
  const auto& phases = st.replica->phases();
  // The steps this actor made (a restored one starts at its restore step).
  r.figures.insert(r.figures.end(), {{"steps", static_cast<double>(
                                                 st.step - st.spec.recovery.restore_step)},
                                     {"forward_seconds", phases.forward},
                                     {"backward_seconds", phases.backward},
                                     {"exchange_wait_seconds", st.exchange_wait},
                                     {"overlap_seconds", st.overlap},
                                     {"step_seconds", phases.step},
                                     {"evaluate_seconds", st.evaluate_seconds}});
  if (st.next)
    r.edges.push_back(st.ring_edge);
  r.edges.insert(r.edges.end(), st.shard_edges.begin(), st.shard_edges.end());
  return r;
}

/// The replica's weights and buffers (layered_model::state()), worker 0's.
tensor_set weights_of(const worker_state& st) {
  tensor_set w{"weights", st.name, st.spec.worker, st.step, 0, {}, {}};
  for (const auto& p : st.replica->model().state())
    w.tensors.push_back(p.detach());
  return w;
}

void finish(worker_actor* self) {
  auto& st = self->state;
  st.finished = true;
  report_trained(self, st.coordinator, st.name, st.counters);
  if (lead(st))
    send_in_parts(self, st.coordinator, weights_of(st));
  self->send(st.coordinator, final_atom::value, make_report(st));
}

void end_epoch(worker_actor* self) {
  auto& st = self->state;
  if (lead(st))
    report_progress(self); // the epoch's training ends here, before its evaluation
  if (lead(st) || shares_evaluation(st)) {
    compute_scope compute{st.work};
    const auto since = activity::clock::now();
    evaluate(st);
    st.evaluate_seconds += std::chrono::duration<double>(activity::clock::now() - since).count();
  }
  close_epoch(self, st.coordinator, st.counters, st.epoch, [&] { return make_report(st); });
  if (lead(st))
    send_epoch_weights(self, st.coordinator, st.spec.recovery, st.name, 0, st.epoch,
                       st.replica->model().state());
  st.epoch += 1;
  if (st.epoch == st.spec.data.plan.epochs)
    return finish(self);
  begin_epoch(st);
}

// -- the parameter-server exchange (exchange: ps) ------------------------------------

bool uses_ps(const worker_state& st) {
  return st.spec.exchange == "ps";
}

/// Computes the next step's gradient and pushes every busy shard its slice.
void push_step(worker_actor* self) {
  auto& st = self->state;
  std::vector<at::Tensor> slices;
  {
    compute_scope compute{st.work};
    slices = st.ps->split(gradients_of_next(st));
  }
  for (size_t s = 0; s < slices.size(); ++s) {
    if (!slices[s].defined())
      continue; // an idle shard: its keys are frozen
    st.shard_edges[s].messages += 1;
    st.shard_edges[s].bytes += static_cast<int64_t>(slices[s].nbytes());
    self->send(st.shards[s], tensor_set{"ps_push", st.name, st.spec.worker, st.step, 0,
                                        {std::move(slices[s])}, {}});
  }
  st.step += 1;
  st.in_epoch += 1;
}

/// Writes the shards' weights of every step pushed whose slices all arrived.
void apply_pulled(worker_state& st) {
  compute_scope compute{st.work};
  while (st.ps->applied() < st.step && st.ps->complete())
    st.ps->apply(st.replica->parameters());
}

/// advance() with the shards: pushes a step while it is at most
/// max_staleness steps ahead of the weights it applied (may_compute), and
/// ends an epoch once every step of it is applied, so that evaluation and
/// the final weights are the shards' (staleness does not cross epochs).
void advance_ps(worker_actor* self) {
  auto& st = self->state;
  while (st.started && !st.finished) {
    auto since = activity::clock::now();
    apply_pulled(st);
    const bool epoch_over = st.in_epoch == st.minibatches.size();
    if (epoch_over ? st.ps->applied() < st.step
                   : !may_compute(st.step, st.ps->applied(), st.spec.max_staleness)) {
      st.work.waiting_for("the shards' new slices of step " + std::to_string(st.ps->applied()));
      st.work.add_busy(since);
      st.waiting_since = activity::clock::now();
      return; // waits for pulls
    }
    if (epoch_over) {
      end_epoch(self);
    } else {
      begin_global_step(self);
      push_step(self);
      maybe_report_progress(self);
    }
    st.work.add_busy(since);
  }
}

/// With nothing on the ring, starts what comes next: the epoch's end
/// (after local SGD's last average), a synchronous step's exchange or a
/// local step (which may put the weights on the ring). Returns whether the
/// ring carries something now.
bool start_next(worker_actor* self) {
  auto& st = self->state;
  if (st.in_epoch == st.minibatches.size()) {
    if (st.local_steps > 0) {
      begin_average(self); // local SGD averages at every epoch end
      return true;
    }
    end_epoch(self);
    return false;
  }
  begin_global_step(self);
  if (st.spec.sync_every == 0) {
    begin_step(self);
    return true;
  }
  local_step(self);
  maybe_report_progress(self);
  return st.exchanging;
}

/// Trains while it can: a step's gradients (or local SGD's weights) go on
/// the ring, the predecessor's chunks are applied as they arrive, and what
/// the exchange was for is finished; returns when it waits for a chunk or
/// is done.
void advance(worker_actor* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  if (st.waiting_since) {
    st.exchange_wait +=
      std::chrono::duration<double>(activity::clock::now() - *st.waiting_since).count();
    st.waiting_since.reset();
  }
  if (uses_ps(st))
    return advance_ps(self);
  while (st.started && !st.finished) {
    if (st.halves && !st.exchanging && st.other_stepped < st.step) {
      st.work.waiting_for("the other half of step " + std::to_string(st.step - 1) + " from " +
                          worker_name(model::ring_next(st.spec.worker, st.spec.workers)));
      st.waiting_since = activity::clock::now();
      return;
    }
    auto since = activity::clock::now();
    if (!st.exchanging && !start_next(self)) {
      st.work.add_busy(since);
      continue;
    }
    if (st.halves) {
      if (!st.other_grads) {
        st.work.waiting_for("the gradients of step " + std::to_string(st.step) + " from " +
                            worker_name(model::ring_next(st.spec.worker, st.spec.workers)));
        st.work.add_busy(since);
        st.waiting_since = activity::clock::now();
        return;
      }
      finish_pair_step(self);
      maybe_report_progress(self);
      st.work.add_busy(since);
      continue;
    }
    apply_arrived(self);
    if (!st.ring->done()) {
      st.work.waiting_for("ring chunks of step " + std::to_string(st.step) + " from " +
                          worker_name(model::ring_previous(st.spec.worker, st.spec.workers)));
      st.work.add_busy(since);
      st.waiting_since = activity::clock::now();
      return;
    }
    if (st.averaging) {
      finish_average(self);
    } else {
      finish_step(self);
      maybe_report_progress(self);
    }
    st.work.add_busy(since);
  }
}

// -- the actor ---------------------------------------------------------------------------

/// Its checkpoint (if any) in place: weights, buffers, momentum, counters,
/// and the global step it restarts at, whose epoch begins at on_start.
void resume(worker_state& st, std::optional<model::training_state> restored) {
  st.checkpoints.emplace(st.spec.recovery);
  st.step = st.spec.recovery.restore_step;
  st.noted = st.step;
  st.epoch = static_cast<int32_t>(st.step / st.steps_per_epoch);
  if (!restored)
    return;
  st.replica->restore(*restored);
  st.counters = training_counters::from_json(restored->counters);
  if (st.ps)
    st.ps->restart_at(st.step);
}

/// The epoch of its first step and its place in it: step 0, or a restored
/// worker's restore step (local SGD's count since the last average follows:
/// averages come after every L steps of an epoch and at its end).
void begin_run(worker_state& st) {
  begin_epoch(st);
  st.in_epoch = static_cast<size_t>(st.step % st.steps_per_epoch);
  if (st.spec.sync_every > 0)
    st.local_steps = static_cast<int32_t>(st.in_epoch % st.spec.sync_every);
}

void init_state(worker_actor* self, worker_setup setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.train = std::move(setup.data.train);
  st.test = std::move(setup.data.test);
  st.validation = std::move(setup.data.validation);
  st.replica.emplace(std::move(setup.model), st.spec);
  const auto& plan = st.spec.data.plan;
  st.steps_per_epoch = model::data_parallel_steps_per_epoch(
    st.train.size(), st.spec.workers, plan.batch_size, model::remainder_policy::pad);
  st.schedule = {st.spec.optimizer.lr, st.spec.linear_scaling, st.spec.workers * plan.batch_size,
                 st.spec.base_batch, st.spec.warmup_epochs, st.spec.optimizer, plan.epochs};
  st.ring.emplace(st.spec.worker, st.spec.workers);
  int32_t next = model::ring_next(st.spec.worker, st.spec.workers);
  st.ring_edge = {st.name, worker_name(next), 0, 0};
  if (uses_ps(st)) {
    st.ps.emplace(st.replica->layout(), st.spec.shards);
    st.shards.resize(static_cast<size_t>(st.spec.shards));
    st.shard_edges = edges_to(st.name, st.spec.shards, shard_name);
  }
  resume(st, std::move(setup.restored));
}

/// A shard's new slice of a step: recorded, applied once the step's slices
/// are all in (ps_exchange refuses a wrong size, step or duplicate).
void on_pull(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
  if (t.invalid || t.kind != "ps_pull" || t.tensors.size() != 1 || t.replica < 0 ||
      t.replica >= st.spec.shards)
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from +
                  "' (expected a shard's new slice, from one of " +
                  std::to_string(st.spec.shards) + " shards)" +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  guarded(self, "parameter server", [&] {
    st.ps->receive(t.replica, t.step, std::move(t.tensors.front()));
    advance(self);
  });
}

/// With exchange: ps the plan gives a worker every shard as a peer.
caf::result<caf::ok_atom> on_shard_peer(worker_actor* self, const caf::actor& peer,
                                        int32_t index) {
  auto& st = self->state;
  if (index < 0 || index >= st.spec.shards)
    return make_error(errc::bad_config, st.name + ": its peers are shards 0 to " +
                                          std::to_string(st.spec.shards - 1) + ", not " +
                                          std::to_string(index));
  st.shards[static_cast<size_t>(index)] = peer;
  return caf::ok_atom::value;
}

/// The peers a worker cannot start without, named ("" when it has them all).
std::string missing_peers(const worker_state& st) {
  if (uses_ps(st))
    return std::any_of(st.shards.begin(), st.shards.end(), [](const auto& s) { return !s; })
             ? "every shard"
             : "";
  return st.spec.workers > 1 && !st.next ? "its ring successor" : "";
}

/// The other worker of a pair that trains one set of weights: its
/// gradients of this step.
void on_other_gradients(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
  auto other = model::ring_next(st.spec.worker, st.spec.workers);
  if (!st.halves || t.replica != other || t.step != st.step || st.other_grads ||
      t.tensors.size() != st.replica->parameters().size())
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set 'gradients' of step " + std::to_string(t.step) +
                  " from '" + t.from + "' (expected " +
                  (st.halves ? "one set of step " + std::to_string(st.step) + " from " +
                                 worker_name(other)
                             : std::string{"none: this worker trains weights of its own"}) +
                  ")");
  st.other_grads = std::move(t.tensors);
  guarded(self, "the pair's step", [=] { advance(self); });
}

/// The other worker of a pair that trains one set of weights has stepped
/// its half of step t.step.
void on_other_stepped(worker_actor* self, const tensor_set& t) {
  auto& st = self->state;
  auto other = model::ring_next(st.spec.worker, st.spec.workers);
  if (!st.halves || t.replica != other || t.step != st.other_stepped || !t.tensors.empty())
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set 'stepped' of step " + std::to_string(t.step) + " from '" +
                  t.from + "' (expected " +
                  (st.halves ? "step " + std::to_string(st.other_stepped) + " from " +
                                 worker_name(other)
                             : std::string{"none: this worker trains weights of its own"}) +
                  ")");
  st.other_stepped = t.step + 1;
  guarded(self, "the pair's step", [=] { advance(self); });
}

/// A chunk from the predecessor: queued (it may come before this worker's
/// start or gradients), then applied in order.
void on_chunk(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
  if (uses_ps(st))
    return on_pull(self, t);
  if (t.kind == "stepped" && !t.invalid)
    return on_other_stepped(self, t);
  if (t.kind == "gradients" && !t.invalid)
    return on_other_gradients(self, t);
  auto previous = model::ring_previous(st.spec.worker, st.spec.workers);
  if (t.invalid || t.kind != "ring" || st.spec.workers == 1 || t.replica != previous ||
      t.tensors.size() != 1 || t.step < st.step)
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from +
                  "' (expected ring chunks of step " + std::to_string(st.step) + " or later from " +
                  worker_name(previous) + ")" +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  st.inbox.push_back(std::move(t));
  guarded(self, "ring all-reduce", [=] { advance(self); });
}

/// Where the two workers of a pair in one process meet (share_weights):
/// the first to be given its successor leaves its weights and momentum
/// under the pair's actor ids, the second takes them.
struct weights_left_table {
  std::mutex mutex;
  std::map<std::pair<caf::actor_id, caf::actor_id>, std::weak_ptr<std::vector<at::Tensor>>>
    left;
};

weights_left_table& weights_left() {
  static weights_left_table table;
  return table;
}

/// Two ring workers in one process, synchronous SGD whose step each element
/// takes alone: they train one set of weights, each stepping half of it
/// with the two gradients' mean (the same values as each stepping all of it
/// in its own copy: the step's memory traffic halves, and the forward and
/// backward read one copy of the weights from the caches). Called when the
/// plan gives the worker its successor, before any worker starts: the first
/// of the pair to get here leaves its tensors, the second takes them.
void share_weights(worker_actor* self) {
  auto& st = self->state;
  if (st.halves || st.spec.workers != 2 || st.spec.sync_every != 0 || uses_ps(st) ||
      !st.replica->steps_in_parts() || st.next.node() != self->node())
    return;
  st.halves = true;
  st.other_stepped = st.step;
  auto& table = weights_left();
  std::lock_guard<std::mutex> lock{table.mutex};
  for (auto it = table.left.begin(); it != table.left.end();)
    it = it->second.expired() ? table.left.erase(it) : std::next(it);
  const caf::actor_id ids[] = {self->id(), st.next.id()};
  const std::pair<caf::actor_id, caf::actor_id> pair{std::min(ids[0], ids[1]),
                                                     std::max(ids[0], ids[1])};
  if (auto it = table.left.find(pair); it != table.left.end()) {
    if (auto tensors = it->second.lock()) {
      st.replica->share(*tensors);
      table.left.erase(it);
      return;
    }
  }
  st.left = std::make_shared<std::vector<at::Tensor>>(st.replica->stepped_tensors());
  table.left.emplace(pair, st.left);
}

/// The ring's successor: the plan's one peer edge of this worker.
caf::result<caf::ok_atom> on_peer(worker_actor* self, const caf::actor& peer, int32_t index) {
  auto& st = self->state;
  if (uses_ps(st))
    return on_shard_peer(self, peer, index);
  if (st.spec.workers == 1 || index != model::ring_next(st.spec.worker, st.spec.workers))
    return make_error(errc::bad_config,
                      st.name + ": its only peer is its successor on the ring, worker " +
                        std::to_string(model::ring_next(st.spec.worker, st.spec.workers)) +
                        ", not " + std::to_string(index));
  st.next = peer;
  try {
    share_weights(self);
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, st.name + ": " + e.what());
  }
  return caf::ok_atom::value;
}

void on_start(worker_actor* self) {
  auto& st = self->state;
  if (st.started)
    return;
  if (auto missing = missing_peers(st); !missing.empty())
    return fail(self, st.coordinator, st.name, "started without " + missing);
  st.started = true;
  st.work.begin();
  if (lead(st)) // the progress line's total: this worker's samples
    self->send(st.coordinator,
               messages::control{messages::control_kind::start, 0,
                                 st.steps_per_epoch * st.spec.data.plan.batch_size *
                                   st.spec.data.plan.epochs,
                                 st.name, {}});
  guarded(self, "training", [=] {
    begin_run(self->state);
    advance(self);
  });
}

caf::behavior worker_behavior(worker_actor* self, worker_setup setup) {
  init_state(self, std::move(setup));
  return {
    observe_coordinator(self),
    answer_heartbeat(self),
    [=](group_atom, const caf::actor& peer, int32_t index) { return on_peer(self, peer, index); },
    [=](start_atom) { on_start(self); },
    [=](tensor_set& t) { on_chunk(self, t); },
    stop_on_request(self, finish),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

} // namespace

caf::expected<caf::actor> spawn_worker(caf::actor_system& sys,
                                       const std::string& name,
                                       const std::string& node,
                                       const worker_settings& spec) {
  try {
    // The task's labels, once: the reference trains on the same.
    auto data = load_task_data(spec.data, spec.task);
    if (!data)
      return data.error();
    auto m = initial_model(spec);
    auto restored = checkpointing{spec.recovery}.restore();
    return spawn_detached(sys, name, worker_behavior,
                          worker_setup{name, node, spec, std::move(*data), std::move(m),
                                       std::move(restored)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

namespace {

caf::error check_worker_paths(const worker_settings& spec, const path_roots& roots) {
  if (auto err = check_paths(spec.data, roots))
    return err;
  if (auto err = check_checkpoint_path(spec.checkpoint, "checkpoint", roots))
    return err;
  if (auto err = check_checkpoint_path(spec.model.name == "torchscript" ? spec.model.path : "",
                                           "TorchScript file", roots))
    return err;
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace

caf::expected<caf::actor> spawn_worker_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<worker_settings>(sys, args, parse_worker_settings, check_worker_paths,
                                            spawn_worker);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
