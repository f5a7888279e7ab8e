#include "actors/roles/source.hpp"

#include <deque>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/fanout.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/roles/sender_handlers.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/augment.hpp"
#include "model/core/batches.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "model/core/task.hpp"

namespace baton::actors {
inline namespace roles {

namespace {

using messages::control;
using messages::control_kind;
using messages::microbatch;

struct source_state {
  std::string name;
  std::string node;
  source_settings spec;
  model::dataset train;
  model::dataset test;
  model::dataset validation; ///< empty without data.validation

  caf::actor coordinator;
  fanout downstream; ///< the first stage, or its replicas
  activity work;
  std::optional<microbatch> pending; ///< made, waiting for its receiver's credit

  // Cursor over the emission order (see source.hpp).
  int32_t epoch = 0;
  model::epoch_plan train_plan;
  std::vector<std::vector<int64_t>> eval_plan;
  std::vector<std::vector<int64_t>> validation_plan;
  size_t next_train = 0;
  size_t next_eval = 0;
  size_t next_validation = 0;
  int64_t next_id = 0;
  int64_t step_base = 0; ///< optimiser steps of the epochs before this one
  bool started = false;
  bool finished = false;
  bool stopping = false; ///< the coordinator asked it to stop (runtime.stop_at_accuracy)
};

/// What the source starts with: loaded before spawning, so that a missing
/// file fails the spawn request instead of a running actor.
struct source_setup {
  std::string name;
  std::string node;
  source_settings spec;
  model::data_splits data;
};

using source_actor = caf::stateful_actor<source_state>;

/// What a microbatch is cut from: the training part, the test split or the
/// validation samples.
enum class source_part { train, test, validation };

microbatch make_microbatch(source_state& st, const std::vector<int64_t>& ids,
                           source_part from) {
  const bool eval = from != source_part::train;
  auto [images, labels] = from == source_part::train
                            ? model::gather_training(st.train, ids, st.epoch)
                          : from == source_part::test ? model::gather(st.test, ids)
                                                      : model::gather(st.validation, ids);
  microbatch m;
  m.id = st.next_id++;
  m.epoch = st.epoch;
  m.eval = eval;
  m.validation = from == source_part::validation;
  m.payload = std::move(images);
  // A frozen stage's feature cache is keyed by them; the validation
  // samples count on from the test split's, so that no two meet.
  m.samples = ids;
  if (m.validation)
    for (auto& id : m.samples)
      id += st.test.size();
  for (const auto& t : st.spec.tasks)
    m.labels.push_back({t.name, model::apply(t, labels)});
  if (!eval) {
    auto k = st.next_train;
    m.step = st.step_base + st.train_plan.step_of[k];
    m.step_size = st.train_plan.step_size_of[k];
    st.work.advanced_to(m.step); // its heartbeats' step: the step it deals
    // Position within the minibatch: count back to the first of its step.
    int32_t index = 0;
    while (k > 0 && st.train_plan.step_of[k - 1] == st.train_plan.step_of[st.next_train]) {
      --k;
      ++index;
    }
    m.index_in_step = index;
  }
  return m;
}

void start_epoch(source_state& st) {
  st.train_plan = model::plan_epoch(st.train.size(), st.spec.plan, st.epoch);
  st.next_train = 0;
  st.next_eval = 0;
  st.next_validation = 0;
}

/// Ends the stream after `steps` minibatches of the run: the last epoch's
/// end, or the step boundary where a stop took effect.
void finish(source_actor* self, int64_t steps) {
  auto& st = self->state;
  st.finished = true;
  st.downstream.broadcast(self, control{control_kind::end_of_stream, st.epoch, steps, "", {}});
  messages::actor_report report;
  report.actor = st.name;
  report.role = "source";
  report.node = st.node;
  report.busy_seconds = st.work.busy_seconds();
  report.idle_seconds = st.work.idle_seconds();
  report.edges = st.downstream.edges();
  self->send(st.coordinator, final_atom::value, std::move(report));
}

/// The next microbatch to emit, made once; false when the epoch has none left.
bool make_next(source_state& st) {
  if (st.pending)
    return true;
  auto since = activity::clock::now();
  if (st.next_train < st.train_plan.microbatches.size()) {
    st.pending =
      make_microbatch(st, st.train_plan.microbatches[st.next_train], source_part::train);
    ++st.next_train;
  } else if (st.next_eval < st.eval_plan.size()) {
    st.pending = make_microbatch(st, st.eval_plan[st.next_eval++], source_part::test);
  } else if (st.next_validation < st.validation_plan.size()) {
    st.pending = make_microbatch(st, st.validation_plan[st.next_validation++],
                                 source_part::validation);
  } else {
    return false;
  }
  st.work.add_busy(since);
  return true;
}

/// Moves the cursor to the first microbatch of training step `start` (a
/// restart after a failure), with the ids a run from the beginning would
/// have given: epochs before it, then the microbatches of its epoch before
/// the step. A step that ends an epoch's training is followed by that
/// epoch's evaluation, which the restored actors have not done yet.
void seek(source_state& st, int64_t start) {
  for (;;) {
    auto steps = st.train_plan.step_of.empty() ? 0 : st.train_plan.step_of.back() + 1;
    if (start <= st.step_base + steps || st.epoch + 1 == st.spec.plan.epochs)
      break;
    st.step_base += steps;
    st.next_id += static_cast<int64_t>(st.train_plan.microbatches.size() + st.eval_plan.size() +
                                       st.validation_plan.size());
    ++st.epoch;
    start_epoch(st);
  }
  while (st.next_train < st.train_plan.step_of.size() &&
         st.step_base + st.train_plan.step_of[st.next_train] < start) {
    ++st.next_train;
    ++st.next_id;
  }
}

/// The minibatches of the run sent so far when a stop may end the stream
/// here (a stop was asked, no microbatch is made and unsent, and the next
/// one begins a training step, so that every stage gets whole minibatches);
/// -1 otherwise. A stop during an evaluation takes effect at the next
/// epoch's first step.
int64_t steps_at_a_stop(const source_state& st) {
  const auto& plan = st.train_plan;
  if (!st.stopping || st.pending || st.next_train >= plan.microbatches.size())
    return -1;
  if (st.next_train == 0)
    return st.step_base;
  const auto k = st.next_train;
  return plan.step_of[k] != plan.step_of[k - 1] ? st.step_base + plan.step_of[k] : -1;
}

/// Emits while the receiver of the next microbatch has credit; controls need none.
void pump(source_actor* self) {
  auto& st = self->state;
  while (st.started && !st.finished) {
    if (auto steps = steps_at_a_stop(st); steps >= 0)
      return finish(self, steps);
    if (make_next(st)) {
      if (!st.downstream.can_send(*st.pending))
        return;
      auto step = st.pending->step;
      st.downstream.send(self, std::move(*st.pending));
      st.pending.reset();
      if (st.downstream.dropped_last())
        self->send(st.coordinator, fault_atom::value, std::string{"dropped"}, st.name, step);
    } else {
      // Controls carry the minibatches (steps) sent so far: a stage replica
      // that had no share of the last ones learns how many to wait for.
      st.step_base += st.train_plan.step_of.empty() ? 0 : st.train_plan.step_of.back() + 1;
      st.downstream.broadcast(self,
                              control{control_kind::epoch_end, st.epoch, st.step_base, "", {}});
      if (++st.epoch == st.spec.plan.epochs)
        return finish(self, st.step_base);
      start_epoch(st);
    }
  }
}

caf::behavior source_behavior(source_actor* self, source_setup setup) {
  auto& init = self->state;
  init.name = std::move(setup.name);
  init.node = std::move(setup.node);
  init.spec = std::move(setup.spec);
  init.downstream = fanout{init.spec.deal_in_turns ? dealing::turns : dealing::deal};
  init.train = std::move(setup.data.train);
  init.test = std::move(setup.data.test);
  init.validation = std::move(setup.data.validation);
  init.eval_plan = model::plan_eval(init.test.size(), init.spec.plan.batch_size);
  init.validation_plan = model::plan_eval(init.validation.size(), init.spec.plan.batch_size);
  caf::message_handler own{
    observe_coordinator(self),
    [=](start_atom) {
      auto& st = self->state;
      if (st.started || st.downstream.size() == 0)
        return;
      st.started = true;
      st.work.begin();
      use_thread_budget(1);
      int64_t total = st.train.size() * st.spec.plan.epochs;
      self->send(st.coordinator, control{control_kind::start, 0, total, st.name, {}});
      start_epoch(st);
      seek(st, st.spec.start_step);
      pump(self);
    },
    // runtime.stop_at_accuracy: the stream ends at the next step boundary,
    // and every stage and head downstream finishes as at its end.
    [=](const control& c) {
      if (c.kind != control_kind::shutdown)
        return;
      self->state.stopping = true;
      pump(self);
    },
  };
  return sender_handlers(self, [=] { pump(self); }).or_else(own);
}

} // namespace

source_settings make_source_settings(const topology& t) {
  source_settings s;
  s.data = t.data;
  s.plan = t.plan;
  s.tasks = t.tasks;
  s.window = t.runtime.window;
  return s;
}

caf::expected<model::data_splits> load_source_data(const source_settings& spec) {
  try {
    return model::load_splits(spec.data);
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

caf::expected<model::data_splits> load_task_data(const source_settings& spec,
                                                 const model::task& task) {
  auto data = load_source_data(spec);
  if (!data)
    return data.error();
  for (auto* part : {&data->train, &data->validation, &data->test})
    if (part->labels.defined())
      part->labels = model::apply(task, part->labels);
  return data;
}

caf::expected<caf::actor> spawn_source(caf::actor_system& sys, const std::string& name,
                                       const std::string& node, const source_settings& spec) {
  auto data = load_source_data(spec);
  if (!data)
    return data.error();
  if (spec.train_samples > 0 && data->train.size() != spec.train_samples)
    return make_error(errc::bad_config,
                      name + ": the training split has " + std::to_string(data->train.size()) +
                        " samples here, but the run was planned for " +
                        std::to_string(spec.train_samples) +
                        " (its learning-rate schedule counts their steps): the data this node "
                        "reads differs from the data where the run was planned");
  source_setup setup{name, node, spec, std::move(*data)};
  return spawn_detached(sys, name, source_behavior, std::move(setup));
}

caf::error check_paths(const source_settings& spec, const path_roots& roots) {
  const model::data_spec& data = spec.data;
  if (data.synthetic()) // generated in memory: reads no file
    return caf::none;
  if (data.kind != "npy")
    return check_path(data.path, "dataset directory", roots.data_dirs, "data_dirs");
  for (const auto* files : {&data.train, &data.test})
    for (const auto* file : {&files->x, &files->y})
      if (auto err = check_path(*file, "dataset file", roots.data_dirs, "data_dirs"))
        return err;
  return caf::none;
}

caf::expected<caf::actor> spawn_source_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<source_settings>(sys, args, parse_source_settings, check_paths, spawn_source);
}

} // namespace roles
} // namespace baton::actors
