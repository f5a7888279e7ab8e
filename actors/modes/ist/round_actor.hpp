#pragma once

// What the round-based actors of job: ist share, for both kinds (the IST
// worker and shard, the ResIST worker and shard): wiring to their peers,
// the start, and a worker's setup, epochs, progress, checkpoints, reports
// and end. Templates over the actor (or state) type: a worker's state is a
// round_worker_state with its own fields; a shard's names its fields alike
// (name, node, coordinator, spec, round, started, finished, workers, edges);
// each worker brings its own report.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/interfaces.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/roles/training_counters.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/dataset.hpp"
#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

/// What a worker is made with: its settings, data and restored counters.
template <class Spec>
struct round_worker_setup {
  std::string name;
  std::string node;
  Spec spec;
  model::dataset train;
  model::dataset test;
  training_counters counters; ///< from its checkpoint of spec.recovery.restore_step, or zero
};

/// The tensors of one round (or one evaluation) from every shard, as they come.
struct round_arrivals {
  std::vector<std::vector<at::Tensor>> from; ///< by shard
  std::vector<bool> came;
  int32_t count = 0;
};

/// What the workers of both kinds hold alike; each derives its state from it.
template <class Spec>
struct round_worker_state {
  std::string name;
  std::string node;
  Spec spec;
  caf::actor coordinator;
  std::vector<caf::actor> shards; ///< by index, from the plan's peer edges

  // -- data and rounds ---------------------------------------------------------------
  model::dataset train;
  model::dataset test;
  int64_t steps_per_epoch = 0;
  int64_t rounds_per_epoch = 0;
  std::vector<std::vector<int64_t>> minibatches; ///< this epoch's
  int32_t epoch = 0;
  int64_t round = 0; ///< the round it waits for or trains
  bool started = false;
  bool finished = false;
  double test_loss = 0; ///< worker 0's evaluation

  training_counters counters; ///< checkpointed at round boundaries (exactly-once counts)
  std::optional<checkpointing> checkpoints;
  activity work;
  std::vector<messages::edge_stats> edges; ///< to each shard
  int64_t received_bytes = 0; ///< from the shards (IST: its subnets', not worker 0's slices)
  int64_t steps_since_progress = 0;
};

/// What a round actor waits for (its heartbeat, activity.hpp): the
/// tensors of round `round` from its `peers` ("shards" or "workers").
inline std::string round_waiting(int64_t round, const std::string& peers) {
  return "the " + peers + "' tensors of round " + std::to_string(round);
}

/// Queues a shard's tensors `t` in `queue` by step: true when they fit
/// (valid, from shard 0 to shards - 1, of step `now` or later, the first
/// from that shard for that step); false leaves `t` and `queue` as they were.
inline bool queue_arrival(std::map<int64_t, round_arrivals>& queue, messages::tensor_set& t,
                          int64_t now, int32_t shards) {
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

/// A worker's report: its activity, counters and edges, and the figures
/// rounds (those this actor made: a restored one starts at its restore
/// step), received_bytes_per_round and sent_bytes_per_round.
template <class State>
messages::actor_report round_worker_report(const State& st, const std::string& role) {
  auto r = activity_report(st.name, role, st.node, st.work);
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
               {"sent_bytes_per_round", static_cast<double>(sent) / rounds}};
  return r;
}

/// The worker's minibatches of epoch st.epoch (model::ist_worker_minibatches:
/// its own seeded order over the whole training set).
template <class State>
void begin_round_epoch(State& st) {
  const auto& plan = st.spec.data.plan;
  st.minibatches = model::ist_worker_minibatches(st.train.size(), plan.seed, st.epoch,
                                                 st.spec.worker, st.spec.workers,
                                                 plan.batch_size);
}

/// A worker's state from its setup: its settings, data and counters, its
/// checkpoints, the steps and rounds of an epoch, an edge per shard, and
/// the round it starts at (a restored worker replays from its restore step:
/// same round, same orders) with that epoch's minibatches.
template <class State, class Spec>
void init_round_worker(State& st, round_worker_setup<Spec> setup) {
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.train = std::move(setup.train);
  st.test = std::move(setup.test);
  st.counters = std::move(setup.counters);
  st.checkpoints.emplace(st.spec.recovery);
  st.steps_per_epoch =
    model::ist_steps_per_epoch(st.train.size(), st.spec.data.plan.batch_size, st.spec.workers);
  st.rounds_per_epoch = model::ist_rounds_per_epoch(st.steps_per_epoch, st.spec.local_steps);
  st.round = st.spec.recovery.restore_step;
  st.epoch = static_cast<int32_t>(st.round / st.rounds_per_epoch);
  st.shards.resize(static_cast<size_t>(st.spec.shards));
  for (int32_t s = 0; s < st.spec.shards; ++s)
    st.edges.push_back({st.name, ist_shard_name(s), 0, 0});
  begin_round_epoch(st);
}

/// A peer edge: `peer` is the actor's peer number `index` among `peers`
/// ("shards" or "workers", as errors name them).
template <class Actor>
caf::result<caf::ok_atom> set_round_peer(Actor* self, std::vector<caf::actor>& peers,
                                         const caf::actor& peer, int32_t index,
                                         const std::string& what) {
  if (index < 0 || index >= static_cast<int32_t>(peers.size()))
    return make_error(errc::bad_config, self->state.name + ": its peers are " + what + " 0 to " +
                                          std::to_string(peers.size() - 1) + ", not " +
                                          std::to_string(index));
  peers[static_cast<size_t>(index)] = peer;
  return caf::ok_atom::value;
}

/// The start: refused without every peer (named "shard" or "worker");
/// else the activity clock starts and `then` runs guarded.
template <class Actor, class Then>
void start_round_actor(Actor* self, const std::vector<caf::actor>& peers,
                       const std::string& what, const std::string& doing, Then then) {
  auto& st = self->state;
  if (st.started)
    return;
  for (size_t p = 0; p < peers.size(); ++p)
    if (!peers[p])
      return fail(self, st.coordinator, st.name,
                  "started without " + what + " " + std::to_string(p) + " as its peer");
  st.started = true;
  st.work.begin();
  guarded(self, doing, then);
}

/// A worker's start: worker 0 announces the progress total (its samples),
/// then `advance` runs.
template <class Actor, class Advance>
void start_round_worker(Actor* self, Advance advance) {
  start_round_actor(self, self->state.shards, "shard", "training", [=] {
    auto& st = self->state;
    const auto& plan = st.spec.data.plan;
    if (st.spec.worker == 0)
      self->send(st.coordinator,
                 messages::control{messages::control_kind::start, 0,
                                   st.steps_per_epoch * plan.batch_size * plan.epochs, st.name,
                                   {}});
    advance(self);
  });
}

/// Worker 0's progress line, every spec.progress_every local steps.
template <class Actor>
void report_round_progress(Actor* self) {
  auto& st = self->state;
  if (st.spec.worker != 0 || st.steps_since_progress < st.spec.progress_every)
    return;
  st.steps_since_progress = 0;
  auto& e = st.counters.epoch;
  self->send(st.coordinator, messages::progress{st.name, st.epoch, st.counters.samples_total,
                                                e.samples ? e.loss_sum / e.samples : 0.0, {}});
}

/// The rounds before st.round are over, its epoch's end included: the
/// counters' checkpoint when due (the shards checkpoint the same round).
/// None once finished: a restored run always has a round to replay.
template <class Actor>
void checkpoint_round(Actor* self) {
  auto& st = self->state;
  if (st.finished)
    return;
  after_step(self, st.coordinator, st.name, *st.checkpoints, st.round, st.counters,
             [&] { return model::training_state{{}, st.round, {}}; });
}

/// A worker's run is over (its last epoch, or a stop): its trained count
/// and final report (`report`() makes it).
template <class Actor, class Report>
void finish_round_worker(Actor* self, Report report) {
  auto& st = self->state;
  st.finished = true;
  report_trained(self, st.coordinator, st.name, st.counters);
  self->send(st.coordinator, final_atom::value, report());
}

/// A shard's run is over (its last round, or a stop, st.round rounds made
/// from the start): `owned`, its tensors as they are now, as its weights,
/// then its final report.
template <class Actor>
void finish_round_shard(Actor* self, std::vector<at::Tensor> owned,
                        messages::actor_report report) {
  auto& st = self->state;
  st.finished = true;
  self->send(st.coordinator, messages::tensor_set{"weights", st.name, st.spec.shard, st.round, 0,
                                                  std::move(owned), {}});
  self->send(st.coordinator, final_atom::value, std::move(report));
}

/// A worker's epoch is over: its report (`report`() makes it), then the
/// run's end or the next epoch's minibatches and the round's checkpoint.
template <class Actor, class Report>
void end_round_epoch(Actor* self, Report report) {
  auto& st = self->state;
  auto e = st.counters.epoch.close(st.epoch);
  st.counters.epochs.push_back(e);
  auto r = report();
  r.epochs = {e};
  self->send(st.coordinator, epoch_atom::value, std::move(r));
  st.epoch += 1;
  if (st.epoch < st.spec.data.plan.epochs) {
    begin_round_epoch(st);
    return checkpoint_round(self);
  }
  finish_round_worker(self, report);
}

/// A worker's counters at spec.recovery.restore_step (zero for 0). Throws
/// model::error on a missing or corrupt checkpoint.
template <class Spec>
training_counters restore_round_counters(const Spec& spec) {
  auto restored = checkpointing{spec.recovery}.restore();
  return restored ? training_counters::from_json(restored->counters) : training_counters{};
}

/// A worker reads its dataset and its checkpoints, from where the node lets it.
template <class Spec>
caf::error check_round_worker_paths(const Spec& spec, const path_roots& roots) {
  if (auto err = check_paths(spec.data, roots))
    return err;
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
