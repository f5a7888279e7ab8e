#pragma once

// The worker of job: ist, for either subnet scheme S (subnet_scheme.hpp):
// trains its subnet of every round for L local steps, on minibatches of its
// own seeded order over the whole training set (as the authors' code draws
// them; model::ist::worker_minibatches).
//
//   round r (every actor computes the round's subnets from seed and r)
//     <- one "<kind>_subnet" from each shard: its pieces of this worker's
//        subnet (S::round_tensors)
//     -> S::train: the subnet assembled, L SGD steps (momentum reset every
//        round), cut back into every shard's pieces
//     -> "<kind>_trained" to each shard: those pieces (step_size: the
//        rounds per epoch, which the shards learn from it)
//   after an epoch's last round: its epoch report; worker 0 first waits
//   for every shard's owned tensors ("<kind>_owned", step = epoch) and
//   evaluates the whole network on the test split (S::evaluate, as the
//   reference does); at the end its trained count and final report (worker
//   0: the whole network's digest). The shards send the final weights.
//
// Recovery (actors/roles/checkpointing.hpp): the job's step is the round. A
// worker checkpoints its counters (epoch sums, epochs, local steps trained:
// the exactly-once counts) when a round is over, its epoch's end included,
// at the same rounds as the shards checkpoint their owned tensors. A
// restored worker starts at run.recovery.restore_step with those counters:
// the same subnets and minibatch order for every replayed round, and no
// local step counted twice. A `throw` fault fires when its pieces of that
// round are all there, before it trains them.
//
// Templates over the scheme: a scheme's .cpp includes this and instantiates
// S::spawn_worker_role (template struct subnet_scheme<...>).

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <torch/torch.h>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/progress_pace.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/round_actor.hpp"
#include "actors/modes/ist/subnet_scheme.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/source.hpp"
#include "actors/roles/training_counters.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace round_worker {

using messages::tensor_set;

/// What a worker is made with: its settings, data and restored counters.
template <class Scheme>
struct worker_setup {
  std::string name;
  std::string node;
  worker_settings<Scheme> spec;
  model::data_splits data;
  training_counters counters; ///< from its checkpoint of spec.recovery.restore_step, or zero
};

/// The tensors of one round (or one evaluation) from every shard, as they come.
struct arrivals {
  std::vector<std::vector<at::Tensor>> from; ///< by shard
  std::vector<bool> came;
  int32_t count = 0;
};

template <class Scheme>
struct worker_state {
  std::string name;
  std::string node;
  worker_settings<Scheme> spec;
  caf::actor coordinator;
  std::vector<caf::actor> shards; ///< by index, from the plan's peer edges
  typename Scheme::worker_model model;

  // -- data and rounds ---------------------------------------------------------------
  model::dataset train;
  model::dataset test;
  model::dataset validation; ///< empty without data.validation
  int64_t steps_per_epoch = 0;
  int64_t rounds_per_epoch = 0;
  std::vector<std::vector<int64_t>> minibatches; ///< this epoch's
  int32_t epoch = 0;
  int64_t round = 0; ///< the round it waits for or trains
  bool started = false;
  bool finished = false;
  bool evaluating = false; ///< worker 0: waits for the shards' owned tensors
  std::map<int64_t, arrivals> subnets; ///< by round
  std::map<int64_t, arrivals> owned;   ///< by epoch (worker 0)
  double test_loss = 0; ///< worker 0's evaluation

  training_counters counters; ///< checkpointed at round boundaries (exactly-once counts)
  std::optional<checkpointing> checkpoints;
  activity work;
  std::vector<messages::edge_stats> edges; ///< to each shard
  int64_t received_bytes = 0; ///< the subnets' from the shards (not worker 0's owned tensors)
  progress_pace progress;
  int64_t round_steps = 0; ///< the last round's local steps
};

template <class Scheme>
using worker_actor = caf::stateful_actor<worker_state<Scheme>>;

template <class Scheme>
bool lead(const worker_state<Scheme>& st) {
  return st.spec.worker == 0;
}

/// Queues a shard's tensors `t` in `queue` by step: true when they fit
/// (valid, from shard 0 to shards - 1, of step `now` or later, the first
/// from that shard for that step); false leaves `t` and `queue` as they were.
inline bool queue_arrival(std::map<int64_t, arrivals>& queue, tensor_set& t, int64_t now,
                          int32_t shards) {
  if (t.invalid || t.replica < 0 || t.replica >= shards || t.step < now)
    return false;
  auto& a = queue[t.step];
  if (a.came.empty()) {
    a.from.resize(static_cast<size_t>(shards));
    a.came.assign(static_cast<size_t>(shards), false);
  }
  if (a.came[static_cast<size_t>(t.replica)])
    return false;
  a.came[static_cast<size_t>(t.replica)] = true;
  a.from[static_cast<size_t>(t.replica)] = std::move(t.tensors);
  a.count += 1;
  return true;
}

/// The minibatches of epoch st.epoch (model::ist::worker_minibatches: its
/// own seeded order over the whole training set).
template <class Scheme>
void begin_epoch(worker_state<Scheme>& st) {
  const auto& plan = st.spec.data.plan;
  st.minibatches = model::ist::worker_minibatches(st.train.size(), plan.seed, st.epoch,
                                                 st.spec.worker, st.spec.workers,
                                                 plan.batch_size);
}

// -- a round -------------------------------------------------------------------------------

/// Trains the round whose pieces all came and sends every shard its pieces back.
template <class Scheme>
void train_round(worker_actor<Scheme>* self, const arrivals& pieces) {
  auto& st = self->state;
  const int64_t first = (st.round % st.rounds_per_epoch) * st.spec.local_steps;
  const int64_t last = std::min(st.steps_per_epoch, first + st.spec.local_steps);
  trained_round trained;
  {
    compute_scope compute{st.work};
    const std::vector<std::vector<int64_t>> steps(st.minibatches.begin() + first,
                                                  st.minibatches.begin() + last);
    trained = Scheme::train(st.model, st.spec, st.round, st.epoch, pieces.from, st.train, steps);
  }
  for (int64_t j = first; j < last; ++j) { // a local step is one minibatch: its id is its step
    const int64_t id = st.epoch * st.steps_per_epoch + j;
    st.counters.admit(id, id);
  }
  st.counters.epoch.loss_sum += trained.steps.loss_sum;
  st.counters.epoch.samples += trained.steps.samples;
  st.counters.samples_total += trained.steps.samples;
  st.round_steps = trained.steps.steps;
  for (int32_t s = 0; s < st.spec.shards; ++s) {
    auto& back = trained.to_shards[static_cast<size_t>(s)];
    auto& edge = st.edges[static_cast<size_t>(s)];
    edge.messages += 1;
    edge.bytes += tensor_bytes(back);
    self->send(st.shards[static_cast<size_t>(s)],
               tensor_set{std::string{Scheme::names.kind} + "_trained", st.name, st.spec.worker,
                          st.round, static_cast<int32_t>(st.rounds_per_epoch), std::move(back),
                          {}});
  }
  st.round += 1;
}

/// The rounds before st.round are over, its epoch's end included: the
/// counters' checkpoint when due (the shards checkpoint the same round).
/// None once finished: a restored run always has a round to replay.
template <class Scheme>
void checkpoint_round(worker_actor<Scheme>* self) {
  auto& st = self->state;
  if (st.finished)
    return;
  after_step(self, st.coordinator, st.name, *st.checkpoints, st.round, st.counters, [&] {
    model::training_state state; // no tensors: its counters are the checkpoint
    state.version = st.round;
    return state;
  });
}

// -- epochs and reports ----------------------------------------------------------------

/// Worker 0: the whole network from every shard's owned tensors, evaluated
/// on the test split and the validation samples as the reference evaluates it.
template <class Scheme>
void evaluate(worker_state<Scheme>& st, const arrivals& owned) {
  compute_scope compute{st.work};
  const auto e = Scheme::evaluate(st.model, st.spec, owned.from, st.test);
  st.test_loss = e.loss;
  st.counters.epoch.evaluated = e.samples;
  st.counters.epoch.correct =
    static_cast<int64_t>(std::llround(e.accuracy * static_cast<double>(e.samples)));
  if (st.validation.size() == 0)
    return;
  const auto v = Scheme::evaluate(st.model, st.spec, owned.from, st.validation);
  st.counters.epoch.validated = v.samples;
  st.counters.epoch.validation_correct =
    static_cast<int64_t>(std::llround(v.accuracy * static_cast<double>(v.samples)));
}

/// Its report: activity, counters and edges, the figures rounds (those this
/// actor made: a restored one starts at its restore step),
/// received_bytes_per_round, sent_bytes_per_round and the scheme's; worker
/// 0's with the whole network's digest and its test loss.
template <class Scheme>
messages::actor_report make_report(const worker_state<Scheme>& st) {
  auto r = activity_report(st.name, std::string{Scheme::names.kind} + "_worker", st.node, st.work);
  r.task = st.spec.task.name;
  report_counters(st.counters, r);
  r.edges = st.edges;
  const int64_t made = st.round - st.spec.recovery.restore_step;
  const double rounds = static_cast<double>(std::max<int64_t>(made, 1));
  int64_t sent = 0;
  for (const auto& e : st.edges)
    sent += e.bytes;
  r.figures = {{"rounds", static_cast<double>(made)},
               {"received_bytes_per_round", static_cast<double>(st.received_bytes) / rounds},
               {"sent_bytes_per_round", static_cast<double>(sent) / rounds},
               Scheme::worker_figure(st.model, st.spec)};
  if (lead(st)) {
    r.weights_digest = Scheme::digest(st.model);
    r.figures.push_back({"test_loss", st.test_loss});
  }
  return r;
}

/// Its run is over (its last epoch, or a stop): its trained count and final report.
template <class Scheme>
void finish(worker_actor<Scheme>* self) {
  auto& st = self->state;
  st.finished = true;
  report_trained(self, st.coordinator, st.name, st.counters);
  self->send(st.coordinator, final_atom::value, make_report(st));
}

/// Its epoch is over: its report, then the run's end or the next epoch's
/// minibatches and the round's checkpoint.
template <class Scheme>
void end_epoch(worker_actor<Scheme>* self) {
  auto& st = self->state;
  close_epoch(self, st.coordinator, st.counters, st.epoch, [&] { return make_report(st); });
  st.epoch += 1;
  if (st.epoch < st.spec.data.plan.epochs) {
    begin_epoch(st);
    return checkpoint_round(self);
  }
  finish(self);
}

/// Worker 0's progress line after a round (progress_pace.hpp says when; an
/// epoch's last round ends its training).
template <class Scheme>
void report_progress(worker_actor<Scheme>* self, bool epoch_ends) {
  auto& st = self->state;
  const bool due = st.progress.due(st.epoch, st.round_steps, st.spec.progress_every);
  if (!lead(st) || !(due || epoch_ends))
    return;
  auto& e = st.counters.epoch;
  self->send(st.coordinator, messages::progress{st.name, st.epoch, st.counters.samples_total,
                                                e.samples ? e.loss_sum / e.samples : 0.0, {}});
}

/// Worker 0 between two epochs: evaluates once every owned tensor came;
/// false while it waits.
template <class Scheme>
bool take_evaluation(worker_actor<Scheme>* self) {
  auto& st = self->state;
  auto it = st.owned.find(st.epoch);
  if (it == st.owned.end() || it->second.count < st.spec.shards)
    return false;
  evaluate(st, it->second);
  st.owned.erase(it);
  st.evaluating = false;
  end_epoch(self);
  return true;
}

/// Trains round st.round once all its pieces came; false while it waits.
template <class Scheme>
bool take_round(worker_actor<Scheme>* self) {
  auto& st = self->state;
  auto it = st.subnets.find(st.round);
  if (it == st.subnets.end() || it->second.count < st.spec.shards)
    return false;
  if (st.round == st.spec.recovery.throw_at_step) // a fault in the middle of a round
    throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round));
  auto pieces = std::move(it->second);
  st.subnets.erase(it);
  train_round(self, pieces);
  const bool epoch_ends = st.round % st.rounds_per_epoch == 0;
  if (epoch_ends) { // the epoch's last round
    if (lead(st))
      st.evaluating = true;
    else
      end_epoch(self);
  } else {
    checkpoint_round(self);
  }
  report_progress(self, epoch_ends);
  return true;
}

/// Takes every step it can: a round whose pieces all came, worker 0's
/// evaluation once every owned tensor came; returns when it waits.
template <class Scheme>
void advance(worker_actor<Scheme>* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  while (st.started && !st.finished) {
    auto since = activity::clock::now();
    if (!(st.evaluating ? take_evaluation(self) : take_round(self)))
      return;
    st.work.add_busy(since);
  }
}

// -- the actor ---------------------------------------------------------------------------

/// A shard's tensors: queued by round (or epoch), then used in order.
template <class Scheme>
void on_tensors(worker_actor<Scheme>* self, tensor_set& t) {
  auto& st = self->state;
  const std::string kind = Scheme::names.kind;
  const bool subnet = t.kind == kind + "_subnet";
  const bool owned = t.kind == kind + "_owned" && lead(st);
  const int64_t now = subnet ? st.round : st.epoch;
  auto& queue = subnet ? st.subnets : st.owned;
  const int64_t bytes = tensor_bytes(t.tensors);
  if (!(subnet || owned) || !queue_arrival(queue, t, now, st.spec.shards))
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one shard's subnet pieces of round " +
                  std::to_string(st.round) + " or later, once" +
                  (lead(st) ? ", or its owned tensors after an epoch)" : ")") +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  if (subnet)
    st.received_bytes += bytes;
  guarded(self, "round " + std::to_string(st.round), [=] { advance(self); });
}

/// Its state from its setup: settings, data, counters, checkpoints, the
/// steps and rounds of an epoch, an edge per shard, and the round it starts
/// at (a restored worker replays from its restore step: same round, same
/// orders) with that epoch's minibatches.
template <class Scheme>
void init_state(worker_state<Scheme>& st, worker_setup<Scheme> setup) {
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.train = std::move(setup.data.train);
  st.test = std::move(setup.data.test);
  st.validation = std::move(setup.data.validation);
  st.counters = std::move(setup.counters);
  st.checkpoints.emplace(st.spec.recovery);
  st.steps_per_epoch =
    model::ist::steps_per_epoch(st.train.size(), st.spec.data.plan.batch_size, st.spec.workers);
  st.rounds_per_epoch = model::ist::rounds_per_epoch(st.steps_per_epoch, st.spec.local_steps);
  st.round = st.spec.recovery.restore_step;
  st.epoch = static_cast<int32_t>(st.round / st.rounds_per_epoch);
  st.shards.resize(static_cast<size_t>(st.spec.shards));
  st.edges = edges_to(st.name, st.spec.shards, shard_name);
  begin_epoch(st);
  st.model = Scheme::make_worker(st.spec);
}

/// Worker 0 announces the progress total (its samples), then it advances.
template <class Scheme>
void start(worker_actor<Scheme>* self) {
  start_round_actor(self, self->state.shards, "shard", "training", [=] {
    auto& st = self->state;
    const auto& plan = st.spec.data.plan;
    if (lead(st))
      self->send(st.coordinator,
                 messages::control{messages::control_kind::start, 0,
                                   st.steps_per_epoch * plan.batch_size * plan.epochs, st.name,
                                   {}});
    advance(self);
  });
}

template <class Scheme>
caf::behavior worker_behavior(worker_actor<Scheme>* self, worker_setup<Scheme> setup) {
  init_state(self->state, std::move(setup));
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [=] { return round_waiting(self->state.round, "shards"); }),
    [=](group_atom, const caf::actor& peer, int32_t index) {
      return set_round_peer(self, self->state.shards, peer, index, "shards");
    },
    [=](start_atom) { start(self); },
    [=](tensor_set& t) { on_tensors(self, t); },
    stop_on_request(self, [](worker_actor<Scheme>* w) { finish(w); }),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// The data as the reference reads it, with the task's labels; refuses
/// samples the network does not take or too few for one step.
template <class Scheme>
caf::expected<model::data_splits> load_data(const worker_settings<Scheme>& spec) {
  auto data = load_task_data(spec.data, spec.task);
  if (!data)
    return data.error();
  for (const auto* split : {&data->train, &data->test})
    if (auto why = Scheme::check_samples(spec.shape, *split); !why.empty())
      return make_error(errc::bad_config, why);
  try {
    model::ist::steps_per_epoch(data->train.size(), spec.data.plan.batch_size, spec.workers);
  } catch (const model::error& e) { // too little data for one step: the topology's fault
    return make_error(errc::bad_config, e.what());
  }
  return data;
}

/// Loads the worker's data and counters and spawns a detached worker `name`.
template <class Scheme>
caf::expected<caf::actor> spawn_worker(caf::actor_system& sys, const std::string& name,
                                       const std::string& node,
                                       const worker_settings<Scheme>& spec) {
  try {
    auto data = load_data(spec);
    if (!data)
      return data.error();
    auto restored = checkpointing{spec.recovery}.restore();
    auto counters =
      restored ? training_counters::from_json(restored->counters) : training_counters{};
    return spawn_detached(sys, name, worker_behavior<Scheme>,
                          worker_setup<Scheme>{name, node, spec, std::move(*data),
                                               std::move(counters)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

/// A worker reads its dataset and its checkpoints, from where the node lets it.
template <class Scheme>
caf::error check_worker_paths(const worker_settings<Scheme>& spec, const path_roots& roots) {
  if (auto err = check_paths(spec.data, roots))
    return err;
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace round_worker

template <class Network>
caf::expected<caf::actor> subnet_scheme<Network>::spawn_worker_role(caf::actor_system& sys,
                                                                    const spawn_args& args) {
  return parse_check_spawn<worker_settings>(sys, args, parse_worker_settings,
                                            round_worker::check_worker_paths<subnet_scheme>,
                                            round_worker::spawn_worker<subnet_scheme>);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
