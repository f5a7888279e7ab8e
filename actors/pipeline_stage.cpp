#include "actors/pipeline_stage.hpp"

#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <variant>

#include <caf/all.hpp>

#include "actors/activity.hpp"
#include "actors/credit_window.hpp"
#include "actors/interfaces.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/local.hpp"
#include "model/stage_trainer.hpp"

namespace baton::actors {

namespace {

using messages::control;
using messages::control_kind;
using messages::gradient;
using messages::microbatch;

struct pipeline_state {
  std::string name;
  std::string node;
  pipeline_stage_spec spec;
  std::shared_ptr<model::stage_trainer> trainer;

  caf::actor coordinator;
  caf::actor upstream; ///< sender of the microbatches: credits and gradients go back
  caf::actor downstream;
  credit_window window{1};
  messages::edge_stats forward_edge;
  messages::edge_stats backward_edge;
  activity work;

  std::deque<std::variant<microbatch, control>> inputs;
  std::deque<gradient> gradients;
  std::map<int64_t, int32_t> step_size_of; ///< in-flight microbatch -> its minibatch size
  int64_t steps_done = 0;                  ///< minibatches completed (flush schedules)
  int32_t backwards_in_step = 0;

  epoch_sums epoch;
  int64_t samples_total = 0;
  int64_t steps_since_progress = 0;
  std::vector<messages::epoch_result> epochs;
};

using pipeline_actor = caf::stateful_actor<pipeline_state>;

bool flush(const pipeline_state& st) {
  return st.spec.schedule != "1f1b";
}

bool drained(const pipeline_state& st) {
  return st.trainer->in_flight() == 0 && st.gradients.empty();
}

/// Whether the front input may go now.
bool front_ready(const pipeline_state& st) {
  if (st.inputs.empty())
    return false;
  if (std::holds_alternative<control>(st.inputs.front()))
    return drained(st);
  const auto& m = std::get<microbatch>(st.inputs.front());
  if (!st.spec.last && !st.window.can_send())
    return false;
  if (m.eval)
    return drained(st);
  return !flush(st) || m.step == st.steps_done;
}

void send_downstream(pipeline_actor* self, microbatch m) {
  auto& st = self->state;
  st.window.on_send();
  st.forward_edge.messages += 1;
  st.forward_edge.bytes += messages::payload_bytes(m);
  self->send(st.downstream, std::move(m));
}

/// Counts a finished backward; steps when the schedule says so.
void after_backward(pipeline_actor* self, int64_t id) {
  auto& st = self->state;
  auto size = st.step_size_of.at(id);
  st.step_size_of.erase(id);
  if (flush(st) && ++st.backwards_in_step < size)
    return;
  st.trainer->step();
  st.backwards_in_step = 0;
  st.steps_done += 1;
}

void send_gradient(pipeline_actor* self, const microbatch& m, at::Tensor value) {
  auto& st = self->state;
  gradient g{m.id, m.step, m.weight_version, std::move(value), {}};
  st.backward_edge.messages += 1;
  st.backward_edge.bytes += static_cast<int64_t>(g.value.nbytes());
  self->send(st.upstream, std::move(g));
}

void maybe_report_progress(pipeline_actor* self, const microbatch& m, double loss) {
  auto& st = self->state;
  if (m.index_in_step != m.step_size - 1 || ++st.steps_since_progress < st.spec.progress_every)
    return;
  st.steps_since_progress = 0;
  self->send(st.coordinator, messages::progress{st.name, m.epoch, st.samples_total, loss, {}});
}

/// The last stage: forward, loss and backward in one go (or evaluation).
void last_stage(pipeline_actor* self, microbatch& m) {
  auto& st = self->state;
  const auto* labels = task_labels_of(m, st.spec.task);
  if (labels == nullptr)
    throw std::runtime_error("microbatch " + std::to_string(m.id) +
                             " carries no labels for task '" + st.spec.task + "'");
  auto batch = m.payload.size(0);
  if (m.eval) {
    auto logits = st.trainer->infer(m.payload);
    st.epoch.correct += logits.argmax(1).eq(*labels).sum().item<int64_t>();
    st.epoch.evaluated += batch;
    return;
  }
  st.trainer->forward(m.id, m.payload, st.spec.first);
  st.step_size_of[m.id] = m.step_size;
  auto r = st.trainer->backward_loss(m.id, *labels, flush(st) ? m.step_size : 1);
  st.epoch.loss_sum += r.loss * batch;
  st.epoch.samples += batch;
  st.samples_total += batch;
  if (!st.spec.first)
    send_gradient(self, m, r.input_gradient);
  after_backward(self, m.id);
  maybe_report_progress(self, m, r.loss);
}

void forward_one(pipeline_actor* self, microbatch m) {
  auto& st = self->state;
  self->send(st.upstream, messages::credit{m.id, 1, {}});
  if (st.spec.first)
    m.weight_version = st.trainer->version();
  if (st.spec.last)
    return last_stage(self, m);
  if (m.eval) {
    m.payload = st.trainer->infer(m.payload);
  } else {
    m.payload = st.trainer->forward(m.id, m.payload, st.spec.first);
    st.step_size_of[m.id] = m.step_size;
  }
  send_downstream(self, std::move(m));
}

void backward_one(pipeline_actor* self, gradient g) {
  auto& st = self->state;
  auto r = st.trainer->backward(g.microbatch_id, g.value);
  if (!st.spec.first) {
    microbatch shape;
    shape.id = g.microbatch_id;
    shape.step = g.step;
    shape.weight_version = g.weight_version;
    send_gradient(self, shape, r.input_gradient);
  }
  after_backward(self, g.microbatch_id);
}

messages::actor_report make_report(const pipeline_state& st) {
  messages::actor_report r;
  r.actor = st.name;
  r.role = "pipeline_stage";
  r.task = st.spec.last ? st.spec.task : "";
  r.node = st.node;
  r.busy_seconds = st.work.busy_seconds();
  r.idle_seconds = st.work.idle_seconds();
  r.samples = st.samples_total;
  if (!st.epochs.empty()) {
    r.train_loss = st.epochs.back().train_loss;
    r.test_accuracy = st.epochs.back().test_accuracy;
  }
  r.weights_digest = model::weights_digest(st.trainer->layers());
  r.epochs = st.epochs;
  if (!st.spec.last)
    r.edges.push_back(st.forward_edge);
  if (!st.spec.first)
    r.edges.push_back(st.backward_edge);
  return r;
}

void on_control(pipeline_actor* self, const control& c) {
  auto& st = self->state;
  if (!st.spec.last)
    self->send(st.downstream, c);
  if (c.kind == control_kind::epoch_end && st.spec.last) {
    auto e = st.epoch.close(c.epoch);
    st.epochs.push_back(e);
    auto report = make_report(st);
    report.epochs = {e};
    self->send(st.coordinator, epoch_atom::value, std::move(report));
  } else if (c.kind == control_kind::end_of_stream) {
    self->send(st.coordinator, final_atom::value, make_report(st));
  }
}

/// Does whatever the schedule allows, until nothing can go.
void act(pipeline_actor* self) {
  auto& st = self->state;
  for (;;) {
    bool forward_first = st.spec.schedule == "gpipe" && front_ready(st);
    auto since = activity::clock::now();
    if (!st.gradients.empty() && !forward_first) {
      auto g = std::move(st.gradients.front());
      st.gradients.pop_front();
      use_thread_budget(st.spec.threads);
      backward_one(self, std::move(g));
    } else if (front_ready(st)) {
      auto input = std::move(st.inputs.front());
      st.inputs.pop_front();
      if (auto* c = std::get_if<control>(&input)) {
        on_control(self, *c);
        continue;
      }
      use_thread_budget(st.spec.threads);
      forward_one(self, std::move(std::get<microbatch>(input)));
    } else {
      return;
    }
    st.work.add_busy(since);
  }
}

/// Runs `f`; a LibTorch or model error fails the actor with a clear message.
template <class F>
void guarded(pipeline_actor* self, const char* what, F f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(self, self->state.coordinator, self->state.name, std::string{what} + ": " + e.what());
  }
}

struct pipeline_setup {
  std::string name;
  std::string node;
  pipeline_stage_spec spec;
  std::shared_ptr<model::stage_trainer> trainer;
};

caf::behavior pipeline_behavior(pipeline_actor* self, pipeline_setup setup) {
  auto& init = self->state;
  init.name = std::move(setup.name);
  init.node = std::move(setup.node);
  init.spec = std::move(setup.spec);
  init.trainer = std::move(setup.trainer);
  init.window = credit_window{init.spec.window};
  return {
    observe_coordinator(self),
    [=](connect_atom, const caf::actor& downstream, const std::string& name) {
      auto& st = self->state;
      st.downstream = downstream;
      st.forward_edge = {st.name, name, 0, 0};
      return caf::ok_atom::value;
    },
    [=](microbatch& m) {
      auto& st = self->state;
      if (m.invalid)
        return fail(self, st.coordinator, st.name, "refused a microbatch: " + describe(m.invalid));
      st.work.begin();
      if (!st.upstream) {
        st.upstream = sender_of(self);
        st.backward_edge = {st.name, "upstream", 0, 0};
      }
      st.inputs.emplace_back(std::move(m));
      guarded(self, "forward", [=] { act(self); });
    },
    [=](control& c) {
      if (c.invalid)
        return fail(self, self->state.coordinator, self->state.name,
                    "refused a control message: " + describe(c.invalid));
      self->state.inputs.emplace_back(std::move(c));
      guarded(self, "control", [=] { act(self); });
    },
    [=](gradient& g) {
      auto& st = self->state;
      if (g.invalid || st.spec.last)
        return fail(self, st.coordinator, st.name, "refused a gradient it cannot use");
      st.gradients.push_back(std::move(g));
      guarded(self, "backward", [=] { act(self); });
    },
    [=](const messages::credit& c) {
      auto& st = self->state;
      if (c.invalid || !st.window.on_credit(c.slots))
        return fail(self, st.coordinator, st.name, "received a credit that matches nothing");
      guarded(self, "forward", [=] { act(self); });
    },
  };
}

} // namespace

caf::expected<caf::actor> spawn_pipeline_stage(caf::actor_system& sys, const std::string& name,
                                               const std::string& node,
                                               const pipeline_stage_spec& spec) {
  try {
    auto whole = model::make_pretrain_model(spec.backbone, spec.classes);
    if (static_cast<size_t>(spec.end) > whole.size())
      return make_error(errc::bad_config, name + ": layers [" + std::to_string(spec.begin) +
                                            ", " + std::to_string(spec.end) + ") exceed the " +
                                            std::to_string(whole.size()) + " layers");
    // Every schedule stashes: under flush schedules all forwards of a
    // minibatch use one version anyway, so stashing costs nothing there.
    auto trainer = std::make_shared<model::stage_trainer>(
      whole.slice(spec.begin, spec.end), spec.optimizer, model::stash_mode::stash);
    return sys.spawn<caf::detached>(pipeline_behavior,
                                    pipeline_setup{name, node, spec, std::move(trainer)});
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, name + ": " + e.what());
  }
}

} // namespace baton::actors
