#include "actors/modes/ist/resist_shard.hpp"

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
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/round_actor.hpp"
#include "actors/modes/ist/resist_pieces.hpp"
#include "actors/roles/training_counters.hpp"
#include "actors/roles/checkpointing.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

using messages::tensor_set;

struct shard_setup {
  std::string name;
  std::string node;
  resist_shard_spec spec;
  resist_layout layout;
  std::vector<at::Tensor> state; ///< its range defined (restored, if any); others undefined
};

struct shard_state {
  std::string name;
  std::string node;
  resist_shard_spec spec;
  caf::actor coordinator;
  std::vector<caf::actor> workers; ///< by index, from the plan's peer edges

  // -- its tensors and the round --------------------------------------------------------
  resist_layout layout;
  std::vector<at::Tensor> state; ///< by state index: its range merged, the rest undefined
  model::resist_deal deal;       ///< this round's
  int64_t round = 0;
  int64_t rounds_per_epoch = 0;  ///< from the workers (0: none came back yet)
  std::vector<std::vector<at::Tensor>> trained; ///< by worker: this round's, as they come
  std::vector<bool> returned;    ///< by worker
  int32_t returned_count = 0;
  bool started = false;
  bool finished = false;
  std::optional<checkpointing> checkpoints; ///< its tensors after rounds

  activity work;
  std::vector<messages::edge_stats> edges; ///< to each worker
};

using shard_actor = caf::stateful_actor<shard_state>;

size_t first_owned(const shard_state& st) {
  return st.layout.bounds.at(static_cast<size_t>(st.spec.shard));
}

size_t end_owned(const shard_state& st) {
  return st.layout.bounds.at(static_cast<size_t>(st.spec.shard) + 1);
}

/// Whether worker `worker` gets round `round`'s state whole
/// (resist_pieces.hpp): the first after a (re)start, and worker 0's before
/// an evaluation.
bool whole_state(const shard_state& st, int32_t worker, int64_t round) {
  return round == st.spec.recovery.restore_step ||
         (worker == 0 && round % st.rounds_per_epoch == 0);
}

std::vector<size_t> tensors_of(const shard_state& st, int32_t worker, bool whole) {
  return resist_message_tensors(st.layout, st.deal, worker, st.spec.shard, whole);
}

void send_to_worker(shard_actor* self, int32_t worker, tensor_set t) {
  auto& st = self->state;
  auto& edge = st.edges[static_cast<size_t>(worker)];
  edge.messages += 1;
  edge.bytes += resist_bytes(t.tensors);
  self->send(st.workers[static_cast<size_t>(worker)], std::move(t));
}

/// Round st.round's starting state, to every worker (`only_lead`: to
/// worker 0, for the run's last evaluation).
void send_round(shard_actor* self, bool only_lead) {
  auto& st = self->state;
  const auto& spec = st.spec;
  st.deal = model::make_resist_deal(st.layout.partitioned.size(), spec.workers, spec.seed,
                                    st.round);
  st.trained.assign(static_cast<size_t>(spec.workers), {});
  st.returned.assign(static_cast<size_t>(spec.workers), false);
  st.returned_count = 0;
  for (int32_t w = 0; w < (only_lead ? 1 : spec.workers); ++w) {
    std::vector<at::Tensor> tensors;
    for (size_t k : tensors_of(st, w, whole_state(st, w, st.round)))
      tensors.push_back(st.state[k]); // never written in place: a merge makes new tensors
    send_to_worker(self, w,
                   tensor_set{"resist_state", st.name, spec.shard, st.round, 0,
                              std::move(tensors), {}});
  }
}

/// Its tensors, in state order.
std::vector<at::Tensor> owned(const shard_state& st) {
  return {st.state.begin() + static_cast<std::ptrdiff_t>(first_owned(st)),
          st.state.begin() + static_cast<std::ptrdiff_t>(end_owned(st))};
}

messages::actor_report make_report(shard_state& st) {
  auto r = activity_report(st.name, "resist_shard", st.node, st.work);
  r.edges = st.edges;
  // The rounds this actor merged (a restored one starts at its restore step).
  r.figures.push_back({"rounds", static_cast<double>(st.round - st.spec.recovery.restore_step)});
  r.figures.push_back({"owned_tensors", static_cast<double>(end_owned(st) - first_owned(st))});
  r.figures.push_back({"owned_bytes", static_cast<double>(resist_bytes(owned(st)))});
  return r;
}

/// A checkpoint of `rounds` rounds made: its tensors by state index.
model::training_state checkpoint_of(const shard_state& st, int64_t rounds) {
  model::training_state state;
  for (size_t k = first_owned(st); k < end_owned(st); ++k)
    state.tensors.emplace_back("state." + std::to_string(k), st.state[k]);
  state.version = rounds;
  return state;
}

/// Every worker's tensors of the round are here: each of its tensors
/// becomes the average over the workers that ran its layer, in worker order.
void merge(shard_state& st) {
  compute_scope compute{st.work};
  torch::NoGradGuard no_grad;
  std::vector<size_t> next(st.trained.size(), 0); // each worker's next tensor
  std::vector<std::vector<size_t>> sent;
  for (int32_t w = 0; w < st.spec.workers; ++w)
    sent.push_back(tensors_of(st, w, false));
  for (size_t k = first_owned(st); k < end_owned(st); ++k) {
    std::vector<at::Tensor> values;
    for (size_t w = 0; w < sent.size(); ++w)
      if (next[w] < sent[w].size() && sent[w][next[w]] == k)
        values.push_back(st.trained[w][next[w]++]);
    st.state[k] = model::resist_average(values); // a new tensor: sent ones stay as they were
  }
  st.trained.assign(st.trained.size(), {});
}

/// The run is over (its last round, or a stop): its tensors as they are
/// now, then its final report.
void finish(shard_actor* self) {
  finish_round_shard(self, owned(self->state), make_report(self->state));
}

/// The round is merged: the checkpoint when due, then the next round (or,
/// after the run's last, the final weights and worker 0's last state).
void end_round(shard_actor* self) {
  auto& st = self->state;
  const int64_t done = st.round + 1;
  after_step(self, st.coordinator, st.name, *st.checkpoints, done, training_counters{},
             [&] { return checkpoint_of(st, done); });
  st.round = done;
  const bool last = done == st.spec.epochs * st.rounds_per_epoch;
  send_round(self, last);
  if (last)
    finish(self);
}

/// A worker's trained tensors of this round.
void on_trained(shard_actor* self, tensor_set& t) {
  auto& st = self->state;
  const auto w = t.replica;
  bool fits = !t.invalid && t.kind == "resist_trained" && st.started && !st.finished &&
              w >= 0 && w < st.spec.workers && t.step == st.round &&
              !st.returned[static_cast<size_t>(w)] && t.step_size >= 1 &&
              (st.rounds_per_epoch == 0 || t.step_size == st.rounds_per_epoch);
  if (!fits)
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one worker's resist_trained of round " +
                  std::to_string(st.round) + ", once, with the rounds per epoch " +
                  (st.rounds_per_epoch ? std::to_string(st.rounds_per_epoch) : "as step_size") +
                  ")" + (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  guarded(self, "merge " + t.from + "'s tensors", [&] {
    // A fault in the middle of a round: some tensors are back, some are not.
    if (st.round == st.spec.recovery.throw_at_step)
      throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round) +
                               " with the tensors of " + t.from + " back");
    check_resist_tensors(t.tensors, st.state, tensors_of(st, w, false),
                         t.from + "'s trained tensors");
    st.rounds_per_epoch = t.step_size;
    st.trained[static_cast<size_t>(w)] = std::move(t.tensors);
    st.returned[static_cast<size_t>(w)] = true;
    if (++st.returned_count < st.spec.workers)
      return;
    auto since = activity::clock::now();
    merge(st);
    st.work.add_busy(since);
    end_round(self);
  });
}

caf::behavior shard_behavior(shard_actor* self, shard_setup setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.layout = std::move(setup.layout);
  st.state = std::move(setup.state);
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
        use_thread_budget(1); // it only averages tensors
        send_round(self, false);
      });
    },
    [=](tensor_set& t) { on_trained(self, t); },
    stop_on_request(self, finish),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// Its range of the initial network, or of its checkpoint of
/// spec.recovery.restore_step (shapes checked); the rest undefined.
shard_setup make_setup(const std::string& name, const std::string& node,
                       const resist_shard_spec& spec) {
  auto network = model::make_resist_network(spec.in_channels, spec.classes, spec.seed);
  shard_setup setup{name, node, spec, make_resist_layout(network, spec.shards), {}};
  const auto initial = network.state();
  setup.state.resize(initial.size());
  auto restored = checkpointing{spec.recovery}.restore();
  const auto s = static_cast<size_t>(spec.shard);
  for (size_t k = setup.layout.bounds[s]; k < setup.layout.bounds[s + 1]; ++k)
    setup.state[k] = restored ? restored->matching("state." + std::to_string(k), initial[k])
                              : initial[k].detach().clone();
  return setup;
}

/// It reads its checkpoints only, from where the node lets it.
caf::error check_shard_paths(const resist_shard_spec& spec, const path_roots& roots) {
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace

caf::expected<caf::actor> spawn_resist_shard(caf::actor_system& sys, const std::string& name,
                                             const std::string& node,
                                             const resist_shard_spec& spec) {
  try {
    return spawn_detached(sys, name, shard_behavior, make_setup(name, node, spec));
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::expected<caf::actor> spawn_resist_shard_role(caf::actor_system& sys,
                                                  const spawn_args& args) {
  return parse_check_spawn<resist_shard_spec>(sys, args, parse_resist_shard_spec,
                                              check_shard_paths, spawn_resist_shard);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
