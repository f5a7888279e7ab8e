#include "actors/modes/ist/ist_shard.hpp"

#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <torch/torch.h>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/interfaces.hpp"
#include "actors/modes/ist/ist_pieces.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/round_actor.hpp"
#include "actors/roles/training_counters.hpp"
#include "actors/roles/checkpointing.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

using messages::tensor_set;

struct shard_setup {
  std::string name;
  std::string node;
  ist_shard_spec spec;
  model::ist_network whole; ///< its owned slices restored from its checkpoint, if any
};

struct shard_state {
  std::string name;
  std::string node;
  ist_shard_spec spec;
  caf::actor coordinator;
  std::vector<caf::actor> workers; ///< by index, from the plan's peer edges

  // -- the network and the round ----------------------------------------------------
  model::ist_network whole; ///< only the owned slices are read or written
  model::ist_partition whole_partition; ///< one worker: its pieces are the owned slices
  std::vector<model::ist_piece> owned;
  model::ist_partition partition; ///< this round's
  int64_t round = 0;
  int64_t rounds_per_epoch = 0;   ///< from the workers (0: none came back yet)
  std::vector<bool> returned;     ///< by worker: its trained pieces of this round came
  int32_t returned_count = 0;
  bool started = false;
  bool finished = false;
  std::optional<checkpointing> checkpoints; ///< its owned slices after rounds

  activity work;
  std::vector<messages::edge_stats> edges; ///< to each worker
};

using shard_actor = caf::stateful_actor<shard_state>;

int64_t bytes_of(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors)
    n += static_cast<int64_t>(t.nbytes());
  return n;
}

void send_to_worker(shard_actor* self, int32_t worker, tensor_set t) {
  auto& st = self->state;
  auto& edge = st.edges[static_cast<size_t>(worker)];
  edge.messages += 1;
  edge.bytes += bytes_of(t.tensors);
  self->send(st.workers[static_cast<size_t>(worker)], std::move(t));
}

/// The pieces of this round's subnets it owns, to every worker.
void send_round(shard_actor* self) {
  auto& st = self->state;
  auto since = activity::clock::now();
  const auto& spec = st.spec;
  st.partition = model::make_ist_partition(spec.shape.hidden, spec.workers, spec.seed, st.round);
  st.returned.assign(static_cast<size_t>(spec.workers), false);
  st.returned_count = 0;
  for (int32_t w = 0; w < spec.workers; ++w) {
    std::vector<at::Tensor> pieces;
    {
      compute_scope compute{st.work};
      pieces = ist_take_pieces(
        st.whole, st.partition, w,
        model::ist_shard_pieces(spec.shape, st.partition, w, spec.shard, spec.shards));
    }
    send_to_worker(self, w, tensor_set{"ist_subnet", st.name, spec.shard, st.round, 0,
                                       std::move(pieces), {}});
  }
  st.work.add_busy(since);
}

messages::actor_report make_report(shard_state& st) {
  auto r = activity_report(st.name, "ist_shard", st.node, st.work);
  r.edges = st.edges;
  // The rounds this actor made (a restored one starts at its restore step).
  const int64_t rounds = st.round - st.spec.recovery.restore_step;
  r.figures.push_back({"rounds", static_cast<double>(rounds)});
  r.figures.push_back({"owned_parameters",
                       static_cast<double>(ist_owned_elements(st.spec.shape, st.spec.shard,
                                                              st.spec.shards))});
  return r;
}

/// Its owned slices (copies: the shard writes its network in place later).
std::vector<at::Tensor> owned_slices(shard_state& st) {
  std::vector<at::Tensor> slices;
  for (auto& t : ist_take_pieces(st.whole, st.whole_partition, 0, st.owned))
    slices.push_back(t.clone());
  return slices;
}

/// A checkpoint of `rounds` rounds made: its owned slices, by index.
model::training_state checkpoint_of(shard_state& st, int64_t rounds) {
  model::training_state state;
  auto slices = owned_slices(st);
  for (size_t i = 0; i < slices.size(); ++i)
    state.tensors.emplace_back("owned." + std::to_string(i), std::move(slices[i]));
  state.version = rounds;
  return state;
}

/// The run is over (its last round, or a stop, with st.round rounds made
/// from the start): its owned slices as they are now, then its final report.
void finish(shard_actor* self) {
  finish_round_shard(self, owned_slices(self->state), make_report(self->state));
}

/// Every worker's pieces of the round are back: the checkpoint when due (a
/// round boundary: the job's step), the epoch's end to worker 0 (and, at the
/// run's end, to the coordinator), then the next round.
void end_round(shard_actor* self) {
  auto& st = self->state;
  const int64_t done = st.round + 1;
  after_step(self, st.coordinator, st.name, *st.checkpoints, done, training_counters{},
             [&] { return checkpoint_of(st, done); });
  if (done % st.rounds_per_epoch == 0) {
    auto slices = owned_slices(st);
    const int64_t epoch = done / st.rounds_per_epoch - 1;
    send_to_worker(self, 0, tensor_set{"ist_owned", st.name, st.spec.shard, epoch, 0, slices, {}});
    if (epoch + 1 == st.spec.epochs) {
      st.round = done;
      return finish(self);
    }
  }
  st.round = done;
  send_round(self);
}

/// A worker's trained pieces of this round, put back in place.
void on_trained(shard_actor* self, tensor_set& t) {
  auto& st = self->state;
  const auto w = t.replica;
  bool fits = !t.invalid && t.kind == "ist_trained" && st.started && !st.finished && w >= 0 &&
              w < st.spec.workers && t.step == st.round && !st.returned[static_cast<size_t>(w)] &&
              t.step_size >= 1 && (st.rounds_per_epoch == 0 || t.step_size == st.rounds_per_epoch);
  if (!fits)
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one worker's trained pieces of round " +
                  std::to_string(st.round) + ", once, with the rounds per epoch " +
                  (st.rounds_per_epoch ? std::to_string(st.rounds_per_epoch) : "as step_size") +
                  ")" + (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  guarded(self, "put back " + t.from + "'s pieces", [&] {
    // A fault in the middle of a round: some pieces are back, some are not.
    if (st.round == st.spec.recovery.throw_at_step)
      throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round) +
                               " with the pieces of " + t.from + " back");
    auto since = activity::clock::now();
    {
      compute_scope compute{st.work};
      ist_put_pieces(st.whole, st.partition, w,
                     model::ist_shard_pieces(st.spec.shape, st.partition, w, st.spec.shard,
                                             st.spec.shards),
                     t.tensors);
    }
    st.work.add_busy(since);
    st.rounds_per_epoch = t.step_size;
    st.returned[static_cast<size_t>(w)] = true;
    if (++st.returned_count == st.spec.workers)
      end_round(self);
  });
}

caf::behavior shard_behavior(shard_actor* self, shard_setup setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.whole = std::move(setup.whole);
  st.whole_partition = ist_whole_partition(st.spec.shape);
  st.owned = model::ist_shard_pieces(st.spec.shape, st.whole_partition, 0, st.spec.shard,
                                     st.spec.shards);
  st.round = st.spec.recovery.restore_step; // a restored shard replays from there
  st.checkpoints.emplace(st.spec.recovery);
  st.workers.resize(static_cast<size_t>(st.spec.workers));
  for (int32_t w = 0; w < st.spec.workers; ++w)
    st.edges.push_back({st.name, ist_worker_name(w), 0, 0});
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [=] { return round_waiting(self->state.round, "workers"); }),
    [=](group_atom, const caf::actor& peer, int32_t index) {
      return set_round_peer(self, self->state.workers, peer, index, "workers");
    },
    [=](start_atom) {
      start_round_actor(self, self->state.workers, "worker", "round 0", [=] {
        use_thread_budget(1); // it only copies slices
        send_round(self);
      });
    },
    [=](tensor_set& t) { on_trained(self, t); },
    stop_on_request(self, finish),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// Puts the owned slices of its checkpoint of spec.recovery.restore_step
/// (none for 0: the initial network) in place. Throws model::error.
void restore_owned(model::ist_network& whole, const ist_shard_spec& spec) {
  auto restored = checkpointing{spec.recovery}.restore();
  if (!restored)
    return;
  const auto partition = ist_whole_partition(spec.shape);
  const auto owned = model::ist_shard_pieces(spec.shape, partition, 0, spec.shard, spec.shards);
  std::vector<at::Tensor> slices;
  for (size_t i = 0; i < owned.size(); ++i)
    slices.push_back(restored->at("owned." + std::to_string(i)));
  ist_put_pieces(whole, partition, 0, owned, slices); // checks every shape
}

/// It reads its checkpoints only, from where the node lets it.
caf::error check_shard_paths(const ist_shard_spec& spec, const path_roots& roots) {
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace

caf::expected<caf::actor> spawn_ist_shard(caf::actor_system& sys, const std::string& name,
                                          const std::string& node, const ist_shard_spec& spec) {
  try {
    auto whole = model::make_ist_network(spec.shape, spec.seed);
    restore_owned(whole, spec);
    return spawn_detached(sys, name, shard_behavior,
                          shard_setup{name, node, spec, std::move(whole)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::expected<caf::actor> spawn_ist_shard_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<ist_shard_spec>(sys, args, parse_ist_shard_spec, check_shard_paths,
                                           spawn_ist_shard);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
