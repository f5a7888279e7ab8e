#include "actors/modes/data_parallel/data_parallel_worker.hpp"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <caf/all.hpp>
#include <torch/torch.h>

#include "actors/flow/activity.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/interfaces.hpp"
#include "actors/modes/data_parallel/data_parallel_section.hpp"
#include "actors/modes/data_parallel/ring_exchange.hpp"
#include "actors/roles/recovery.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/data_parallel.hpp"
#include "model/error.hpp"
#include "model/freezing.hpp"
#include "model/local.hpp"
#include "model/stage_trainer.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace data_parallel {

namespace {

using messages::tensor_set;

/// What a worker starts with: its settings, data and model.
struct worker_setup {
  std::string name;
  std::string node;
  data_parallel_worker_spec spec;
  model::dataset train;
  model::dataset test;
  model::layered_model model;
};

struct worker_state {
  std::string name;
  std::string node;
  data_parallel_worker_spec spec;
  caf::actor coordinator;
  caf::actor next; ///< the ring's successor (null when W = 1)

  // -- the replica and its optimizer ---------------------------------------------
  model::layered_model model;
  std::vector<at::Tensor> parameters; ///< the leaves, named_parameters() order
  std::vector<at::Tensor> momentum;
  bool stepped = false;               ///< momentum buffers hold a step (torch's `first`)
  model::flat_layout layout;
  std::vector<model::bucket> buckets;
  model::lr_schedule schedule;
  int64_t steps_per_epoch = 0;

  // -- data and progress ----------------------------------------------------------
  model::dataset train;
  model::dataset test;
  std::vector<std::vector<int64_t>> minibatches; ///< this epoch's share, cut
  int32_t epoch = 0;
  size_t in_epoch = 0; ///< the epoch's next minibatch
  int64_t step = 0;    ///< global steps taken
  bool started = false;
  bool exchanging = false; ///< a step's gradients are on the ring
  bool finished = false;
  std::optional<ring_exchange> ring;
  std::deque<tensor_set> inbox; ///< the predecessor's chunks, in arrival (= send) order

  training_counters counters;
  activity work;
  messages::edge_stats ring_edge;
  int64_t steps_since_progress = 0;
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
/// reference computes a worker's gradient; leaves no gradient in the model.
std::vector<at::Tensor> gradients_of_next(worker_state& st) {
  const auto& ids = st.minibatches[st.in_epoch];
  auto [images, labels] = model::gather(st.train, ids);
  const at::Tensor logits = st.model.slice(0, st.model.size()).forward(images);
  const at::Tensor loss = torch::nn::functional::cross_entropy(logits, labels);
  loss.backward();
  auto batch = static_cast<int64_t>(ids.size());
  st.counters.admit(st.step * st.spec.workers + st.spec.worker, st.step);
  st.counters.epoch.loss_sum += loss.item<double>() * static_cast<double>(batch);
  st.counters.epoch.samples += batch;
  st.counters.samples_total += batch;
  std::vector<at::Tensor> grads;
  for (auto& p : st.parameters) {
    grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::Tensor());
    p.mutable_grad() = at::Tensor();
  }
  return grads;
}

void send_round(worker_actor* self, const ring_message& m) {
  auto& st = self->state;
  st.ring_edge.messages += 1;
  st.ring_edge.bytes += static_cast<int64_t>(m.chunk.nbytes());
  self->send(st.next, tensor_set{"ring", st.name, st.spec.worker, st.step, m.round,
                                 {m.chunk}, {}});
}

/// Computes the step's gradients and puts their buckets on the ring.
void begin_step(worker_actor* self) {
  auto& st = self->state;
  std::vector<at::Tensor> flats;
  {
    compute_scope compute{st.work};
    auto grads = gradients_of_next(st);
    for (const auto& b : st.buckets)
      flats.push_back(model::bucket_flat(b, st.layout, grads));
  }
  st.exchanging = true;
  if (auto first = st.ring->begin(std::move(flats)))
    send_round(self, *first);
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
    if (auto next = st.ring->receive({t.step_size, t.tensors.front()}))
      send_round(self, *next);
  }
}

/// The all-reduced gradients divided by W, then one SGD step of every
/// parameter with the scheduled lr: the reference's sgd_update.
void finish_step(worker_actor* self) {
  auto& st = self->state;
  compute_scope compute{st.work};
  std::vector<at::Tensor> reduced(st.layout.keys.size());
  for (size_t b = 0; b < st.buckets.size(); ++b)
    model::scatter_bucket(st.buckets[b], st.layout,
                          at::div(st.ring->buckets()[b], static_cast<double>(st.spec.workers)),
                          reduced);
  model::optimizer_spec opt = st.spec.optimizer;
  opt.lr = model::scheduled_lr(st.schedule, st.step, st.steps_per_epoch);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < st.parameters.size(); ++i) {
    if (!reduced[i].defined())
      continue;
    const at::Tensor next = model::sgd_step_out_of_place(st.parameters[i].detach(), reduced[i],
                                                         st.momentum[i], opt, !st.stepped);
    st.parameters[i].copy_(next);
  }
  st.stepped = true;
  st.step += 1;
  st.in_epoch += 1;
  st.exchanging = false;
}

void maybe_report_progress(worker_actor* self) {
  auto& st = self->state;
  if (!lead(st) || ++st.steps_since_progress < st.spec.progress_every)
    return;
  st.steps_since_progress = 0;
  auto& e = st.counters.epoch;
  self->send(st.coordinator, messages::progress{st.name, st.epoch, st.counters.samples_total,
                                                e.samples ? e.loss_sum / e.samples : 0.0, {}});
}

// -- epochs and reports ----------------------------------------------------------------

/// Worker 0's test accuracy counts, as the reference evaluates (evaluation
/// mode, then training mode again).
void evaluate(worker_state& st) {
  torch::NoGradGuard no_grad;
  st.model.slice(0, st.model.size()).train(false);
  for (const auto& ids : model::plan_eval(st.test.size(), st.spec.eval_batch)) {
    auto [images, labels] = model::gather(st.test, ids);
    st.counters.epoch.correct += st.model.forward(images).argmax(1).eq(labels).sum().item<int64_t>();
    st.counters.epoch.evaluated += static_cast<int64_t>(ids.size());
  }
  model::apply_freeze_point(st.model, 0);
}

messages::actor_report make_report(worker_state& st) {
  messages::actor_report r;
  r.actor = st.name;
  r.role = "data_parallel_worker";
  r.task = st.spec.task.name;
  r.node = st.node;
  r.busy_seconds = st.work.busy_seconds();
  r.idle_seconds = st.work.idle_seconds();
  r.compute_cpu_seconds = st.work.compute_cpu_seconds();
  r.process_cpu_seconds = st.work.process_cpu_seconds_since_begin();
  report_counters(st.counters, r);
  r.weights_digest = model::weights_digest(st.model);
  if (st.next)
    r.edges.push_back(st.ring_edge);
  return r;
}

/// The replica's weights and buffers (layered_model::state()), worker 0's.
tensor_set weights_of(const worker_state& st) {
  tensor_set w{"weights", st.name, st.spec.worker, st.step, 0, {}, {}};
  for (const auto& p : st.model.state())
    w.tensors.push_back(p.detach());
  return w;
}

void finish(worker_actor* self) {
  auto& st = self->state;
  st.finished = true;
  self->send(st.coordinator, trained_atom::value, st.name, st.counters.trained,
             st.counters.duplicates);
  if (lead(st))
    self->send(st.coordinator, weights_of(st));
  self->send(st.coordinator, final_atom::value, make_report(st));
}

void end_epoch(worker_actor* self) {
  auto& st = self->state;
  if (lead(st)) {
    compute_scope compute{st.work};
    evaluate(st);
  }
  auto e = st.counters.epoch.close(st.epoch);
  st.counters.epochs.push_back(e);
  auto report = make_report(st);
  report.epochs = {e};
  self->send(st.coordinator, epoch_atom::value, std::move(report));
  st.epoch += 1;
  if (st.epoch == st.spec.data.plan.epochs)
    return finish(self);
  begin_epoch(st);
}

/// Trains while it can: a step's gradients go on the ring, the
/// predecessor's chunks are applied as they arrive, and a step whose
/// exchange is over is taken; returns when it waits for a chunk or is done.
void advance(worker_actor* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  while (st.started && !st.finished) {
    auto since = activity::clock::now();
    if (!st.exchanging) {
      if (st.in_epoch == st.minibatches.size()) {
        end_epoch(self);
        st.work.add_busy(since);
        continue;
      }
      begin_step(self);
    }
    apply_arrived(self);
    if (!st.ring->done()) {
      st.work.add_busy(since);
      return;
    }
    finish_step(self);
    st.work.add_busy(since);
    maybe_report_progress(self);
  }
}

// -- the actor ---------------------------------------------------------------------------

void init_state(worker_actor* self, worker_setup setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.train = std::move(setup.train);
  st.test = std::move(setup.test);
  st.model = std::move(setup.model);
  st.parameters = st.model.parameters();
  for (const auto& p : st.parameters)
    st.momentum.push_back(torch::zeros_like(p));
  st.layout = model::make_flat_layout(st.model);
  st.buckets = model::make_buckets(st.layout, st.spec.bucket_mb);
  const auto& plan = st.spec.data.plan;
  st.steps_per_epoch = model::data_parallel_steps_per_epoch(
    st.train.size(), st.spec.workers, plan.batch_size, model::remainder_policy::pad);
  st.schedule = {st.spec.optimizer.lr, st.spec.linear_scaling, st.spec.workers * plan.batch_size,
                 st.spec.base_batch, st.spec.warmup_epochs};
  st.ring.emplace(st.spec.worker, st.spec.workers);
  int32_t next = model::ring_next(st.spec.worker, st.spec.workers);
  st.ring_edge = {st.name, worker_name(next), 0, 0};
}

/// A chunk from the predecessor: queued (it may come before this worker's
/// start or gradients), then applied in order.
void on_chunk(worker_actor* self, tensor_set& t) {
  auto& st = self->state;
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

/// The ring's successor: the plan's one peer edge of this worker.
caf::result<caf::ok_atom> on_peer(worker_actor* self, const caf::actor& peer, int32_t index) {
  auto& st = self->state;
  if (st.spec.workers == 1 || index != model::ring_next(st.spec.worker, st.spec.workers))
    return make_error(errc::bad_config,
                      st.name + ": its only peer is its successor on the ring, worker " +
                        std::to_string(model::ring_next(st.spec.worker, st.spec.workers)) +
                        ", not " + std::to_string(index));
  st.next = peer;
  return caf::ok_atom::value;
}

void on_start(worker_actor* self) {
  auto& st = self->state;
  if (st.started)
    return;
  if (st.spec.workers > 1 && !st.next)
    return fail(self, st.coordinator, st.name, "started without its ring successor");
  st.started = true;
  st.work.begin();
  if (lead(st)) // the progress line's total: this worker's samples
    self->send(st.coordinator,
               messages::control{messages::control_kind::start, 0,
                                 st.steps_per_epoch * st.spec.data.plan.batch_size *
                                   st.spec.data.plan.epochs,
                                 st.name, {}});
  guarded(self, "training", [=] {
    begin_epoch(self->state);
    advance(self);
  });
}

caf::behavior worker_behavior(worker_actor* self, worker_setup setup) {
  init_state(self, std::move(setup));
  return {
    observe_coordinator(self),
    [=](group_atom, const caf::actor& peer, int32_t index) { return on_peer(self, peer, index); },
    [=](start_atom) { on_start(self); },
    [=](tensor_set& t) { on_chunk(self, t); },
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

} // namespace

caf::expected<caf::actor> spawn_data_parallel_worker(caf::actor_system& sys,
                                                     const std::string& name,
                                                     const std::string& node,
                                                     const data_parallel_worker_spec& spec) {
  try {
    auto data = load_source_data(spec.data);
    if (!data)
      return data.error();
    auto& [train, test] = *data;
    // The task's labels, once: the reference trains on the same.
    train.labels = model::apply(spec.task, train.labels);
    test.labels = model::apply(spec.task, test.labels);
    auto m = make_data_parallel_model(spec.model);
    return spawn_detached(sys, name, worker_behavior,
                          worker_setup{name, node, spec, std::move(train), std::move(test),
                                       std::move(m)});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

namespace {

caf::error check_worker_paths(const data_parallel_worker_spec& spec, const path_roots& roots) {
  return check_paths(spec.data, roots);
}

} // namespace

caf::expected<caf::actor> spawn_data_parallel_worker_role(caf::actor_system& sys,
                                                          const spawn_args& args) {
  return parse_check_spawn<data_parallel_worker_spec>(sys, args, parse_data_parallel_worker_spec,
                                                      check_worker_paths,
                                                      spawn_data_parallel_worker);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
