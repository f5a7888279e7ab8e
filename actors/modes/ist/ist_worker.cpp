#include "actors/modes/ist/ist_worker.hpp"

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
#include "actors/modes/ist/ist_pieces.hpp"
#include "actors/modes/ist/ist_section.hpp"
#include "actors/modes/ist/round_actor.hpp"

#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/error.hpp"
#include "model/ist/ist.hpp"
#include "model/core/local.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

using messages::tensor_set;

using worker_setup = round_worker_setup<ist_worker_spec>;
using arrivals = round_arrivals;

struct worker_state : round_worker_state<ist_worker_spec> {
  bool evaluating = false; ///< worker 0: waits for the shards' owned slices
  std::map<int64_t, arrivals> subnets; ///< by round
  std::map<int64_t, arrivals> owned;   ///< by epoch (worker 0)

  // -- worker 0's whole network (evaluation) ------------------------------------------
  model::ist_network whole;
  model::ist_partition whole_partition;
};

using worker_actor = caf::stateful_actor<worker_state>;

bool lead(const worker_state& st) {
  return st.spec.worker == 0;
}

int64_t bytes_of(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors)
    n += static_cast<int64_t>(t.nbytes());
  return n;
}

/// Its subnet of this round, trained for the round's local steps.
model::ist_network train_subnet(worker_state& st, const model::ist_partition& partition,
                                const std::vector<std::vector<at::Tensor>>& pieces) {
  compute_scope compute{st.work};
  auto subnet = ist_assemble_subnet(st.spec.shape, partition, st.spec.worker, pieces);
  const int64_t first = (st.round % st.rounds_per_epoch) * st.spec.local_steps;
  const int64_t last = std::min(st.steps_per_epoch, first + st.spec.local_steps);
  const std::vector<std::vector<int64_t>> steps(st.minibatches.begin() + first,
                                                st.minibatches.begin() + last);
  const auto r = model::ist_local_steps(subnet, st.train, steps, st.spec.optimizer);
  for (int64_t j = first; j < last; ++j) { // a local step is one minibatch: its id is its step
    const int64_t id = st.epoch * st.steps_per_epoch + j;
    st.counters.admit(id, id);
  }
  st.counters.epoch.loss_sum += r.loss_sum;
  st.counters.epoch.samples += r.samples;
  st.counters.samples_total += r.samples;
  st.steps_since_progress += r.steps;
  return subnet;
}

/// Trains the round whose pieces all came and sends them back.
void train_round(worker_actor* self, arrivals pieces) {
  auto& st = self->state;
  const auto& spec = st.spec;
  const auto partition =
    model::make_ist_partition(spec.shape.hidden, spec.workers, spec.data.plan.seed, st.round);
  const auto subnet = train_subnet(st, partition, pieces.from);
  for (int32_t s = 0; s < spec.shards; ++s) {
    auto back = ist_split_subnet(subnet, spec.shape, partition, spec.worker, s, spec.shards);
    auto& edge = st.edges[static_cast<size_t>(s)];
    edge.messages += 1;
    edge.bytes += bytes_of(back);
    self->send(st.shards[static_cast<size_t>(s)],
               tensor_set{"ist_trained", st.name, spec.worker, st.round,
                          static_cast<int32_t>(st.rounds_per_epoch), std::move(back), {}});
  }
  st.round += 1;
}

// -- epochs and reports ----------------------------------------------------------------

/// Worker 0: the whole network from every shard's owned slices, evaluated
/// on the test split as the reference evaluates it.
void evaluate(worker_state& st, const arrivals& slices) {
  compute_scope compute{st.work};
  for (int32_t s = 0; s < st.spec.shards; ++s)
    ist_put_pieces(st.whole, st.whole_partition, 0,
                   model::ist_shard_pieces(st.spec.shape, st.whole_partition, 0, s,
                                           st.spec.shards),
                   slices.from[static_cast<size_t>(s)]);
  const auto e = model::ist_evaluate(st.whole, st.test, st.spec.eval_batch);
  st.test_loss = e.loss;
  st.counters.epoch.evaluated = e.samples;
  st.counters.epoch.correct =
    static_cast<int64_t>(std::llround(e.accuracy * static_cast<double>(e.samples)));
}

messages::actor_report make_report(worker_state& st) {
  auto r = round_worker_report(st, "ist_worker");
  r.figures.push_back({"formula_bytes_per_round",
                       model::ist_bytes_formula(st.spec.shape, st.spec.workers)});
  if (lead(st)) {
    r.weights_digest = model::ist_digest(st.whole);
    r.figures.push_back({"test_loss", st.test_loss});
  }
  return r;
}

void end_epoch(worker_actor* self) {
  auto& st = self->state;
  end_round_epoch(self, [&] { return make_report(st); });
}

/// Takes every step it can: a round whose pieces all came, worker 0's
/// evaluation once every owned slice came; returns when it waits.
void advance(worker_actor* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  while (st.started && !st.finished) {
    auto since = activity::clock::now();
    if (st.evaluating) {
      auto it = st.owned.find(st.epoch);
      if (it == st.owned.end() || it->second.count < st.spec.shards)
        return;
      evaluate(st, it->second);
      st.owned.erase(it);
      st.evaluating = false;
      end_epoch(self);
      st.work.add_busy(since);
      continue;
    }
    auto it = st.subnets.find(st.round);
    if (it == st.subnets.end() || it->second.count < st.spec.shards)
      return;
    if (st.round == st.spec.recovery.throw_at_step) // a fault in the middle of a round
      throw std::runtime_error("injected fault: throw in round " + std::to_string(st.round));
    auto pieces = std::move(it->second);
    st.subnets.erase(it);
    train_round(self, std::move(pieces));
    if (st.round % st.rounds_per_epoch == 0) { // the epoch's last round
      if (lead(st))
        st.evaluating = true;
      else
        end_epoch(self);
    } else {
      checkpoint_round(self);
    }
    st.work.add_busy(since);
    report_round_progress(self);
  }
}

// -- the actor ---------------------------------------------------------------------------

/// A shard's tensors: queued by round (or epoch), then used in order.
void on_tensors(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
  const bool subnet = t.kind == "ist_subnet";
  const bool slices = t.kind == "ist_owned" && lead(st);
  const int64_t now = subnet ? st.round : st.epoch;
  auto& queue = subnet ? st.subnets : st.owned;
  const int64_t bytes = bytes_of(t.tensors);
  if (!(subnet || slices) || !queue_arrival(queue, t, now, st.spec.shards))
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from + "' of step " +
                  std::to_string(t.step) + " (expected one shard's subnet pieces of round " +
                  std::to_string(st.round) + " or later, once" +
                  (lead(st) ? ", or its owned slices after an epoch)" : ")") +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  if (subnet)
    st.received_bytes += bytes;
  guarded(self, "round " + std::to_string(st.round), [=] { advance(self); });
}

void init_state(worker_actor* self, worker_setup setup) {
  auto& st = self->state;
  init_round_worker(st, std::move(setup));
  if (lead(st)) {
    st.whole = model::make_ist_network(st.spec.shape, st.spec.data.plan.seed);
    st.whole_partition = ist_whole_partition(st.spec.shape);
  }
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
    [=](tensor_set& t) { on_tensors(self, t); },
    stop_on_request(self, [](worker_actor* w) {
      finish_round_worker(w, [w] { return make_report(w->state); });
    }),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// The data as the reference reads it, with the task's labels; refuses
/// samples that are not `inputs` values wide or too few for one step.
caf::expected<std::pair<model::dataset, model::dataset>> load_data(const ist_worker_spec& spec) {
  auto data = load_source_data(spec.data);
  if (!data)
    return data.error();
  auto& [train, test] = *data;
  train.labels = model::apply(spec.task, train.labels);
  test.labels = model::apply(spec.task, test.labels);
  for (const auto* split : {&train, &test})
    if (split->size() > 0 && split->images.numel() / split->size() != spec.shape.inputs)
      return make_error(errc::bad_config, "samples of " +
                                            std::to_string(split->images.numel() / split->size()) +
                                            " values, expected " +
                                            std::to_string(spec.shape.inputs));
  try {
    model::ist_steps_per_epoch(train.size(), spec.data.plan.batch_size, spec.workers);
  } catch (const model::error& e) { // too little data for one step: the topology's fault
    return make_error(errc::bad_config, e.what());
  }
  return data;
}

} // namespace

caf::expected<caf::actor> spawn_ist_worker(caf::actor_system& sys, const std::string& name,
                                           const std::string& node, const ist_worker_spec& spec) {
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

caf::expected<caf::actor> spawn_ist_worker_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<ist_worker_spec>(sys, args, parse_ist_worker_spec,
                                            check_round_worker_paths,
                                            spawn_ist_worker);
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
