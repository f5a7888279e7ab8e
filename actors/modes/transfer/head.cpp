#include "actors/modes/transfer/head.hpp"

#include <memory>
#include <optional>
#include <utility>

#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/epoch_sums.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/progress_pace.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "actors/modes/transfer/merged_input.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/injected_faults.hpp"
#include "actors/roles/training_counters.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/training.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

using messages::control;
using messages::control_kind;
using messages::microbatch;

struct head_state {
  std::string name;
  std::string node;
  head_settings spec;
  std::shared_ptr<model::head_trainer> trainer; ///< built by the spawner, used only here

  caf::actor coordinator;
  /// What came from the backbone's replicas, taken in the source's order.
  std::optional<merged_input> inputs;
  activity work;
  training_counters counters; ///< epoch sums, epochs, exactly-once counts (checkpointed)
  std::optional<checkpointing> checkpoints;
  progress_pace progress;
  double progress_loss = 0;
  int64_t progress_samples = 0;
};

using head_actor = caf::stateful_actor<head_state>;

/// The head's progress line (progress_pace.hpp says when): after a
/// training step, and at the epoch's first evaluation microbatch, where its
/// training ended.
void maybe_report_progress(head_actor* self, const microbatch& m) {
  auto& st = self->state;
  const bool due = m.eval ? st.progress.ended(m.epoch)
                          : m.index_in_step == m.step_size - 1 &&
                              st.progress.due(m.epoch, 1, st.spec.progress_every);
  if (!due)
    return;
  auto loss = st.progress_loss / std::max<int64_t>(1, st.progress_samples);
  self->send(st.coordinator,
             messages::progress{st.name, m.epoch, st.counters.samples_total, loss, {}});
  st.progress_loss = 0;
  st.progress_samples = 0;
}

/// "" or, when a training microbatch before `m` never came (a drop fault,
/// a lost message), which: a step trained without it would be wrong.
std::string lost_before(const head_state& st, const microbatch& m) {
  auto steps_done = st.trainer->version();
  if (m.eval || st.counters.trained_before(m.id, m.step, steps_done))
    return {};
  auto admitted = st.counters.admitted_in(m.step);
  if (m.step > steps_done)
    return "step " + std::to_string(steps_done) + " is incomplete";
  if (m.index_in_step == m.step_size - 1 && admitted != m.step_size - 1)
    return std::to_string(m.step_size - 1 - admitted) + " of step " + std::to_string(m.step);
  return {};
}

/// Trains on (or evaluates) one microbatch. Returns false on a failure.
bool process(head_actor* self, const microbatch& m) {
  auto& st = self->state;
  const auto& task = st.spec.head.task_def.name;
  const auto* labels = task_labels_of(m, task);
  if (labels == nullptr) {
    fail(self, st.coordinator, st.name,
         "microbatch " + std::to_string(m.id) + " carries no labels for task '" + task + "'");
    return false;
  }
  if (auto lost = lost_before(st, m); !lost.empty()) {
    fail(self, st.coordinator, st.name,
         "microbatch " + std::to_string(m.id) + " of step " + std::to_string(m.step) +
           " came, but a microbatch before it never did (" + lost + ")");
    return false;
  }
  if (m.eval)
    maybe_report_progress(self, m);
  auto since = activity::clock::now();
  auto trained = guarded(self, "training on microbatch " + std::to_string(m.id) + " failed", [&] {
    use_thread_budget(st.spec.threads);
    auto batch = m.payload.size(0);
    if (m.eval) {
      st.counters.epoch.add_evaluation(m.validation, st.trainer->correct(m.payload, *labels),
                                       batch);
    } else {
      if (st.counters.trained_before(m.id, m.step, st.trainer->version())) {
        st.counters.duplicates += 1;
        return; // already trained (a replay): dropped
      }
      st.counters.admit(m.id, m.step);
      maybe_throw_fault(st.checkpoints->spec(), m);
      auto last = m.index_in_step == m.step_size - 1;
      auto loss = st.trainer->train(m.payload, *labels, m.step_size, last);
      st.counters.epoch.loss_sum += loss * batch;
      st.counters.epoch.samples += batch;
      st.counters.samples_total += batch;
      st.progress_loss += loss * batch;
      st.progress_samples += batch;
      if (last)
        after_step(self, st.coordinator, st.name, *st.checkpoints, st.trainer->version(),
                   st.counters, [&] { return st.trainer->save_state(); });
    }
  });
  if (!trained)
    return false;
  st.work.add_busy(since);
  if (!m.eval)
    maybe_report_progress(self, m);
  return true;
}

messages::actor_report make_report(const head_state& st) {
  auto r = activity_report(st.name, "head", st.node, st.work);
  r.task = st.spec.head.task_def.name;
  report_counters(st.counters, r);
  r.weights_digest = model::weights_digest(st.trainer->model());
  return r;
}

/// The head's trained weights and buffers (layered_model::state()).
messages::tensor_set weights_of(const head_state& st) {
  messages::tensor_set w{"weights", st.name, 0, st.trainer->version(), 0, {}, {}};
  for (const auto& p : st.trainer->model().state())
    w.tensors.push_back(p.detach());
  return w;
}

void on_control(head_actor* self, const control& c) {
  auto& st = self->state;
  if (c.kind == control_kind::epoch_end) {
    close_epoch(self, st.coordinator, st.counters, c.epoch, [&] { return make_report(st); });
    send_epoch_weights(self, st.coordinator, st.spec.recovery, st.name, 0, c.epoch,
                       st.trainer->model().state());
  } else if (c.kind == control_kind::end_of_stream) {
    report_trained(self, st.coordinator, st.name, st.counters);
    send_in_parts(self, st.coordinator, weights_of(st)); // for --save-model
    self->send(st.coordinator, final_atom::value, make_report(st));
  }
}

/// Takes every input that may go now (merged_input says which), until one
/// fails the head.
void take_inputs(head_actor* self) {
  auto& st = self->state;
  while (auto next = st.inputs->next()) {
    if (auto* m = std::get_if<microbatch>(&*next)) {
      if (!process(self, *m))
        return;
    } else {
      on_control(self, std::get<control>(*next));
    }
  }
}

struct head_setup {
  std::string name;
  std::string node;
  head_settings spec;
  std::shared_ptr<model::head_trainer> trainer;
  training_counters counters; ///< restored from the checkpoint, or zero
};

caf::behavior head_behavior(head_actor* self, head_setup setup) {
  auto& init = self->state;
  init.name = std::move(setup.name);
  init.node = std::move(setup.node);
  init.spec = std::move(setup.spec);
  init.trainer = std::move(setup.trainer);
  init.counters = std::move(setup.counters);
  init.checkpoints.emplace(init.spec.recovery);
  init.inputs.emplace(init.spec.replicas);
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [=] {
      const auto& st = self->state;
      if (st.spec.replicas == 1)
        return std::string{"microbatches from its stage"};
      // Held: they wait for a copy that has not sent its next one.
      return "microbatches from the backbone's " + std::to_string(st.spec.replicas) +
             " copies (" + std::to_string(st.inputs->held()) + " held for the source's order)";
    }),
    [=](microbatch& m) {
      auto& st = self->state;
      if (m.invalid)
        return fail(self, st.coordinator, st.name,
                    "refused a microbatch that could not be decoded: " + describe(m.invalid));
      st.work.begin();
      self->send(sender_of(self), messages::credit{m.id, 1, {}});
      st.inputs->add(std::move(m));
      take_inputs(self);
    },
    [=](fault_atom, const std::string& kind) {
      auto& st = self->state;
      fail(self, st.coordinator, st.name, "injected fault: " + kind);
    },
    [=](control& c) {
      if (c.invalid)
        return fail(self, self->state.coordinator, self->state.name,
                    "refused a control message: " + describe(c.invalid));
      self->state.inputs->add(std::move(c));
      take_inputs(self);
    },
  };
}

} // namespace

caf::expected<caf::actor> spawn_head(caf::actor_system& sys, const std::string& name,
                                     const std::string& node, const head_settings& spec) {
  try {
    auto trainer = std::make_shared<model::head_trainer>(
      model::make_model(spec.head.model), spec.head.task_def, spec.head.optimizer);
    trainer->set_name(name);
    if (spec.steps_per_epoch > 0)
      trainer->set_schedule(spec.steps_per_epoch, spec.epochs);
    training_counters counters;
    if (auto restored = checkpointing{spec.recovery}.restore()) {
      trainer->restore(*restored);
      counters = training_counters::from_json(restored->counters);
    }
    head_setup setup{name, node, spec, std::move(trainer), std::move(counters)};
    return spawn_detached(sys, name, head_behavior, std::move(setup));
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::error check_paths(const head_settings& spec, const path_roots& roots) {
  // A trainable actor writes its checkpoints there and restores from them.
  if (auto err = check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots))
    return err;
  return check_checkpoint_path(spec.head.model.path, "TorchScript file", roots);
}

caf::expected<caf::actor> spawn_head_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<head_settings>(sys, args, parse_head_settings, check_paths, spawn_head);
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
