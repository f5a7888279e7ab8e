#include "actors/modes/ist/resist_worker.hpp"

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
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/interfaces.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/round_actor.hpp"
#include "actors/modes/ist/resist_pieces.hpp"

#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist.hpp"
#include "model/ist/resist.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

using messages::tensor_set;

using worker_setup = round_worker_setup<resist_worker_spec>;
using arrivals = round_arrivals;

struct worker_state : round_worker_state<resist_worker_spec> {
  model::layered_model network; ///< the whole resnet18; the layers it runs are current
  resist_layout layout;
  std::map<int64_t, arrivals> states; ///< by round
};

using worker_actor = caf::stateful_actor<worker_state>;

bool lead(const worker_state& st) {
  return st.spec.worker == 0;
}

model::resist_deal deal_of(const worker_state& st, int64_t round) {
  return model::make_resist_deal(st.layout.partitioned.size(), st.spec.workers,
                                 st.spec.data.plan.seed, round);
}

/// Whether round `round`'s state comes whole (resist_pieces.hpp): the first
/// after a (re)start, and worker 0's before an evaluation.
bool whole_state(const worker_state& st, int64_t round) {
  return round == st.spec.recovery.restore_step ||
         (lead(st) && round % st.rounds_per_epoch == 0);
}

/// The merged state of this round from every shard, copied in.
void apply_state(worker_state& st, const arrivals& state) {
  compute_scope compute{st.work};
  const auto deal = deal_of(st, st.round);
  const bool whole = whole_state(st, st.round);
  auto target = st.network.state();
  torch::NoGradGuard no_grad;
  for (int32_t s = 0; s < st.spec.shards; ++s) {
    const auto indices = resist_message_tensors(st.layout, deal, st.spec.worker, s, whole);
    const auto& values = state.from[static_cast<size_t>(s)];
    check_resist_tensors(values, target, indices, ist_shard_name(s) + "'s state");
    for (size_t i = 0; i < indices.size(); ++i)
      target[indices[i]].copy_(values[i]);
  }
}

/// Its sub-ResNet of this round, trained for the round's local steps.
void train_subnet(worker_state& st, const model::resist_deal& deal) {
  compute_scope compute{st.work};
  const auto active = model::resist_active_layers(st.layout.layers, st.layout.partitioned, deal,
                                                  st.spec.worker);
  const int64_t first = (st.round % st.rounds_per_epoch) * st.spec.local_steps;
  const int64_t last = std::min(st.steps_per_epoch, first + st.spec.local_steps);
  const std::vector<std::vector<int64_t>> steps(st.minibatches.begin() + first,
                                                st.minibatches.begin() + last);
  const auto r = model::resist_local_steps(st.network, active, st.train, steps,
                                           st.spec.optimizer);
  for (int64_t j = first; j < last; ++j) { // a local step is one minibatch: its id is its step
    const int64_t id = st.epoch * st.steps_per_epoch + j;
    st.counters.admit(id, id);
  }
  st.counters.epoch.loss_sum += r.loss_sum;
  st.counters.epoch.samples += r.samples;
  st.counters.samples_total += r.samples;
  st.steps_since_progress += r.steps;
}

/// Trains this round and sends every shard its trained tensors (views of
/// the network: a shard only reads them before this worker's next state).
void train_round(worker_actor* self) {
  auto& st = self->state;
  const auto deal = deal_of(st, st.round);
  train_subnet(st, deal);
  const auto state = st.network.state();
  for (int32_t s = 0; s < st.spec.shards; ++s) {
    std::vector<at::Tensor> trained;
    for (size_t k : resist_message_tensors(st.layout, deal, st.spec.worker, s, false))
      trained.push_back(state[k].detach());
    auto& edge = st.edges[static_cast<size_t>(s)];
    edge.messages += 1;
    edge.bytes += resist_bytes(trained);
    self->send(st.shards[static_cast<size_t>(s)],
               tensor_set{"resist_trained", st.name, st.spec.worker, st.round,
                          static_cast<int32_t>(st.rounds_per_epoch), std::move(trained), {}});
  }
  st.round += 1;
}

// -- epochs and reports ----------------------------------------------------------------

/// Worker 0: the merged network on the test split, its blocks scaled.
void evaluate(worker_state& st) {
  compute_scope compute{st.work};
  const auto scale = model::resist_eval_scale(st.layout.partitioned.size(), st.spec.workers);
  const auto e = model::resist_evaluate(st.network, st.layout.partitioned, scale, st.test,
                                        st.spec.eval_batch);
  st.test_loss = e.loss;
  st.counters.epoch.evaluated = st.test.size();
  st.counters.epoch.correct =
    static_cast<int64_t>(std::llround(e.accuracy * static_cast<double>(st.test.size())));
}

messages::actor_report make_report(worker_state& st) {
  auto r = round_worker_report(st, "resist_worker");
  r.figures.push_back({"model_bytes", static_cast<double>(resist_bytes(st.network.state()))});
  if (lead(st)) {
    r.weights_digest = model::weights_digest(st.network);
    r.figures.push_back({"test_loss", st.test_loss});
  }
  return r;
}

void end_epoch(worker_actor* self) {
  auto& st = self->state;
  end_round_epoch(self, [&] { return make_report(st); });
}

/// This round's state is all there: copied in; worker 0 evaluates the
/// epoch it ends; then the round is trained (unless the run is over).
void take_round(worker_actor* self, arrivals state) {
  auto& st = self->state;
  if (st.round == st.spec.recovery.throw_at_step) // a fault in the middle of a round
    throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round));
  apply_state(st, state);
  if (lead(st) && st.round > st.spec.recovery.restore_step &&
      st.round % st.rounds_per_epoch == 0) {
    evaluate(st);
    end_epoch(self);
    if (st.finished)
      return;
  }
  train_round(self);
  if (st.round % st.rounds_per_epoch != 0)
    checkpoint_round(self);
  else if (!lead(st)) // worker 0 ends the epoch when it has evaluated it
    end_epoch(self);
}

/// Takes every round whose state all came; returns when it waits.
void advance(worker_actor* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  while (st.started && !st.finished) {
    auto it = st.states.find(st.round);
    if (it == st.states.end() || it->second.count < st.spec.shards)
      return;
    auto since = activity::clock::now();
    auto state = std::move(it->second);
    st.states.erase(it);
    take_round(self, std::move(state));
    st.work.add_busy(since);
    report_round_progress(self);
  }
}

// -- the actor ---------------------------------------------------------------------------

/// A shard's state of a round: queued by round, then used in order.
void on_state(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
  const int64_t bytes = resist_bytes(t.tensors);
  if (t.kind != "resist_state" || st.finished ||
      !queue_arrival(st.states, t, st.round, st.spec.shards))
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one shard's resist_state of round " +
                  std::to_string(st.round) + " or later, once)" +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  st.received_bytes += bytes;
  guarded(self, "round " + std::to_string(st.round), [=] { advance(self); });
}

void init_state(worker_actor* self, worker_setup setup) {
  auto& st = self->state;
  init_round_worker(st, std::move(setup));
  st.network =
    model::make_resist_network(st.spec.in_channels, st.spec.task.classes, st.spec.data.plan.seed);
  st.layout = make_resist_layout(st.network, st.spec.shards);
}

caf::behavior worker_behavior(worker_actor* self, worker_setup setup) {
  init_state(self, std::move(setup));
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [=] { return round_waiting(self->state.round, "shards"); }),
    [=](group_atom, const caf::actor& peer, int32_t index) {
      return set_round_peer(self, self->state.shards, peer, index, "shards");
    },
    [=](start_atom) { start_round_worker(self, advance); },
    [=](tensor_set& t) { on_state(self, t); },
    stop_on_request(self, [](worker_actor* w) {
      finish_round_worker(w, [w] { return make_report(w->state); });
    }),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// The data as the reference reads it, with the task's labels; refuses
/// samples of another channel count or too few for one step.
caf::expected<std::pair<model::dataset, model::dataset>>
load_data(const resist_worker_spec& spec) {
  auto data = load_source_data(spec.data);
  if (!data)
    return data.error();
  auto& [train, test] = *data;
  train.labels = model::apply(spec.task, train.labels);
  test.labels = model::apply(spec.task, test.labels);
  for (const auto* split : {&train, &test})
    if (split->size() > 0 &&
        (split->images.dim() != 4 || split->images.size(1) != spec.in_channels))
      return make_error(errc::bad_config, "samples of shape " +
                                            c10::str(split->images.sizes().slice(1)) +
                                            ", expected " + std::to_string(spec.in_channels) +
                                            " channels x height x width");
  try {
    model::ist_steps_per_epoch(train.size(), spec.data.plan.batch_size, spec.workers);
  } catch (const model::error& e) { // too little data for one step: the topology's fault
    return make_error(errc::bad_config, e.what());
  }
  return data;
}

} // namespace

caf::expected<caf::actor> spawn_resist_worker(caf::actor_system& sys, const std::string& name,
                                              const std::string& node,
                                              const resist_worker_spec& spec) {
  try {
    auto data = load_data(spec);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    auto counters = restore_round_counters(spec);
    return spawn_detached(sys, name, worker_behavior,
                          worker_setup{name, node, spec, std::move(train), std::move(test),
                                       std::move(counters)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::expected<caf::actor> spawn_resist_worker_role(caf::actor_system& sys,
                                                   const spawn_args& args) {
  return parse_check_spawn<resist_worker_spec>(sys, args, parse_resist_worker_spec,
                                               check_round_worker_paths, spawn_resist_worker);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
