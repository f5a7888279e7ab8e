#pragma once

// The shard of job: ist, for either subnet scheme S (subnet_scheme.hpp): owns
// 1/S of the network (IST: of the neurons of every hidden layer; ResIST: a
// range of its state tensors) and hands every worker its pieces of the
// round's subnet.
//
//   start
//     -> round r: S::begin_round (the round's subnets from seed and r); to
//        every worker w, the pieces of w's subnet it owns ("<kind>_subnet",
//        step r)
//     -> wait for every worker's trained pieces ("<kind>_trained", step r),
//        S::take_trained as each comes, S::end_round when all came (IST:
//        nothing, every piece is back in place; ResIST: the average)
//     -> the epoch's last round: its owned tensors to worker 0, which
//        evaluates the whole network ("<kind>_owned", step = epoch)
//     -> the run's last round: its owned tensors to the coordinator as its
//        share of the final weights ("weights"), its report, done
//     -> else round r + 1
//
// Every actor computes the round's subnets from seed and round: no
// partition messages. The rounds per epoch come from the workers (their
// data size: each "<kind>_trained" carries it in step_size); a shard checks
// they agree.
//
// Recovery (actors/roles/checkpointing.hpp): the job's step is the round.
// After round r's pieces are all back, a shard checkpoints its owned
// tensors as step r + 1 when due and tells the coordinator of it; a restored
// shard starts at run.recovery.restore_step with the tensors of that
// checkpoint and replays the round with the same subnets. A `throw` fault
// fires when the first trained pieces of its round come back (the middle of
// a round).
//
// Templates over the scheme: a scheme's .cpp includes this and instantiates
// S::spawn_shard_role (template struct subnet_scheme<...>).

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
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "actors/modes/ist/round_actor.hpp"
#include "actors/modes/ist/section.hpp"
#include "actors/modes/ist/subnet_scheme.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/training_counters.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
namespace ist {

namespace round_shard {

using messages::tensor_set;

template <class Scheme>
struct shard_setup {
  std::string name;
  std::string node;
  shard_settings<Scheme> spec;
  typename Scheme::shard_model model; ///< its owned tensors restored from its checkpoint, if any
};

template <class Scheme>
struct shard_state {
  std::string name;
  std::string node;
  shard_settings<Scheme> spec;
  caf::actor coordinator;
  std::vector<caf::actor> workers; ///< by index, from the plan's peer edges

  // -- its tensors and the round ------------------------------------------------------
  typename Scheme::shard_model model;
  int64_t round = 0;
  int64_t rounds_per_epoch = 0;   ///< from the workers (0: none came back yet)
  std::vector<bool> returned;     ///< by worker: its trained pieces of this round came
  int32_t returned_count = 0;
  bool started = false;
  bool finished = false;
  std::optional<checkpointing> checkpoints; ///< its owned tensors after rounds

  activity work;
  std::vector<messages::edge_stats> edges; ///< to each worker
};

template <class Scheme>
using shard_actor = caf::stateful_actor<shard_state<Scheme>>;

template <class Scheme>
void send_to_worker(shard_actor<Scheme>* self, int32_t worker, const std::string& what,
                    int64_t step, std::vector<at::Tensor> tensors) {
  auto& st = self->state;
  auto& edge = st.edges[static_cast<size_t>(worker)];
  edge.messages += 1;
  edge.bytes += tensor_bytes(tensors);
  self->send(st.workers[static_cast<size_t>(worker)],
             tensor_set{std::string{Scheme::names.kind} + "_" + what, st.name, st.spec.shard,
                        step, 0, std::move(tensors), {}});
}

/// The pieces of this round's subnets it owns, to every worker.
template <class Scheme>
void send_round(shard_actor<Scheme>* self) {
  auto& st = self->state;
  auto since = activity::clock::now();
  Scheme::begin_round(st.model, st.spec, st.round);
  st.returned.assign(static_cast<size_t>(st.spec.workers), false);
  st.returned_count = 0;
  for (int32_t w = 0; w < st.spec.workers; ++w) {
    std::vector<at::Tensor> pieces;
    {
      compute_scope compute{st.work};
      pieces = Scheme::round_tensors(st.model, st.spec, w);
    }
    send_to_worker(self, w, "subnet", st.round, std::move(pieces));
  }
  st.work.add_busy(since);
}

template <class Scheme>
messages::actor_report make_report(const shard_state<Scheme>& st) {
  auto r = activity_report(st.name, std::string{Scheme::names.kind} + "_shard", st.node, st.work);
  r.edges = st.edges;
  // The rounds this actor made (a restored one starts at its restore step).
  const int64_t rounds = st.round - st.spec.recovery.restore_step;
  r.figures.push_back({"rounds", static_cast<double>(rounds)});
  for (auto& f : Scheme::shard_figures(st.model, st.spec))
    r.figures.push_back(std::move(f));
  return r;
}

/// A checkpoint of `rounds` rounds made: its owned tensors, by index.
template <class Scheme>
model::training_state checkpoint_of(const shard_state<Scheme>& st, int64_t rounds) {
  model::training_state state;
  auto owned = Scheme::owned(st.model);
  for (size_t i = 0; i < owned.size(); ++i)
    state.tensors.emplace_back("owned." + std::to_string(i), std::move(owned[i]));
  state.version = rounds;
  return state;
}

/// The run is over (its last round, or a stop, with st.round rounds made
/// from the start): its owned tensors as they are now as its weights, then
/// its final report.
template <class Scheme>
void finish(shard_actor<Scheme>* self) {
  auto& st = self->state;
  st.finished = true;
  send_in_parts(self, st.coordinator,
                tensor_set{"weights", st.name, st.spec.shard, st.round, 0, Scheme::owned(st.model),
                           {}});
  self->send(st.coordinator, final_atom::value, make_report(st));
}

/// Every worker's pieces of the round are back: the checkpoint when due (a
/// round boundary: the job's step), the epoch's end to worker 0 (and, at the
/// run's end, to the coordinator), then the next round.
template <class Scheme>
void end_round(shard_actor<Scheme>* self) {
  auto& st = self->state;
  const int64_t done = st.round + 1;
  after_step(self, st.coordinator, st.name, *st.checkpoints, done, training_counters{},
             [&] { return checkpoint_of(st, done); });
  st.round = done;
  if (done % st.rounds_per_epoch == 0) {
    const int64_t epoch = done / st.rounds_per_epoch - 1;
    send_to_worker(self, 0, "owned", epoch, Scheme::owned(st.model));
    send_epoch_weights(self, st.coordinator, st.spec.recovery, st.name, st.spec.shard,
                       static_cast<int32_t>(epoch), Scheme::owned(st.model));
    if (epoch + 1 == st.spec.epochs)
      return finish(self);
  }
  send_round(self);
}

/// Whether `t` is one worker's trained pieces of this round, once, with the
/// rounds per epoch the others sent.
template <class Scheme>
bool fits(const shard_state<Scheme>& st, const tensor_set& t) {
  const auto w = t.replica;
  return !t.invalid && t.kind == std::string{Scheme::names.kind} + "_trained" && st.started &&
         !st.finished && w >= 0 && w < st.spec.workers && t.step == st.round &&
         !st.returned[static_cast<size_t>(w)] && t.step_size >= 1 &&
         (st.rounds_per_epoch == 0 || t.step_size == st.rounds_per_epoch);
}

/// A worker's trained pieces of this round, taken (S::take_trained); the
/// round's end once every worker's came.
template <class Scheme>
void on_trained(shard_actor<Scheme>* self, tensor_set& t) {
  auto& st = self->state;
  if (!fits(st, t))
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one worker's trained pieces of round " +
                  std::to_string(st.round) + ", once, with the rounds per epoch " +
                  (st.rounds_per_epoch ? std::to_string(st.rounds_per_epoch) : "as step_size") +
                  ")" + (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  guarded(self, "take " + t.from + "'s pieces", [&] {
    // A fault in the middle of a round: some pieces are back, some are not.
    if (st.round == st.spec.recovery.throw_at_step)
      throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round) +
                               " with the pieces of " + t.from + " back");
    auto since = activity::clock::now();
    const auto w = t.replica;
    const bool last = st.returned_count + 1 == st.spec.workers;
    {
      compute_scope compute{st.work};
      Scheme::take_trained(st.model, st.spec, w, t.tensors, t.from);
      if (last)
        Scheme::end_round(st.model, st.spec);
    }
    st.work.add_busy(since);
    st.rounds_per_epoch = t.step_size;
    st.returned[static_cast<size_t>(w)] = true;
    if (++st.returned_count == st.spec.workers)
      end_round(self);
  });
}

template <class Scheme>
caf::behavior shard_behavior(shard_actor<Scheme>* self, shard_setup<Scheme> setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.model = std::move(setup.model);
  st.round = st.spec.recovery.restore_step; // a restored shard replays from there
  st.checkpoints.emplace(st.spec.recovery);
  st.workers.resize(static_cast<size_t>(st.spec.workers));
  st.edges = edges_to(st.name, st.spec.workers, worker_name);
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [=] { return round_waiting(self->state.round, "workers"); }),
    [=](group_atom, const caf::actor& peer, int32_t index) {
      return set_round_peer(self, self->state.workers, peer, index, "workers");
    },
    [=](start_atom) {
      start_round_actor(self, self->state.workers, "worker", "round 0", [=] {
        use_thread_budget(1); // it only copies and averages tensors
        send_round(self);
      });
    },
    [=](tensor_set& t) { on_trained(self, t); },
    stop_on_request(self, [](shard_actor<Scheme>* s) { finish(s); }),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// Its initial model with the owned tensors of its checkpoint of
/// spec.recovery.restore_step (none for 0) in place. Throws model::error.
template <class Scheme>
typename Scheme::shard_model restored_model(const shard_settings<Scheme>& spec) {
  auto m = Scheme::make_shard(spec);
  auto restored = checkpointing{spec.recovery}.restore();
  if (!restored)
    return m;
  std::vector<at::Tensor> owned;
  for (size_t i = 0; i < Scheme::owned(m).size(); ++i)
    owned.push_back(restored->at("owned." + std::to_string(i)));
  Scheme::put_owned(m, spec, owned); // checks every shape
  return m;
}

template <class Scheme>
caf::expected<caf::actor> spawn_shard(caf::actor_system& sys, const std::string& name,
                                      const std::string& node, const shard_settings<Scheme>& spec) {
  try {
    return spawn_detached(sys, name, shard_behavior<Scheme>,
                          shard_setup<Scheme>{name, node, spec, restored_model(spec)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

/// It reads its checkpoints only, from where the node lets it.
template <class Scheme>
caf::error check_shard_paths(const shard_settings<Scheme>& spec, const path_roots& roots) {
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace round_shard

template <class Network>
caf::expected<caf::actor> subnet_scheme<Network>::spawn_shard_role(caf::actor_system& sys,
                                                                   const spawn_args& args) {
  return parse_check_spawn<shard_settings>(sys, args, parse_shard_settings,
                                           round_shard::check_shard_paths<subnet_scheme>,
                                           round_shard::spawn_shard<subnet_scheme>);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
