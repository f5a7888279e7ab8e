#include "actors/modes/data_parallel/shard.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <caf/all.hpp>

#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/modes/data_parallel/section.hpp"
#include "actors/modes/data_parallel/worker.hpp"
#include "actors/modes/data_parallel/ps_exchange.hpp"
#include "actors/roles/training_counters.hpp"
#include "actors/roles/checkpointing.hpp"
#include "actors/roles/source.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/data_parallel/data_parallel.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"
#include "model/core/freezing.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

namespace {

using messages::tensor_set;

/// What a shard starts with: its settings, its part's optimizer, the run's length.
struct shard_setup {
  std::string name;
  std::string node;
  shard_settings spec;
  shard_optimizer core;
  int64_t steps = 0; ///< the run's steps: epochs x steps per epoch
};

struct shard_state {
  std::string name;
  std::string node;
  shard_settings spec;
  caf::actor coordinator;
  std::vector<caf::actor> workers; ///< by worker index (the plan's peer edges)
  std::optional<shard_optimizer> core;
  int64_t steps = 0;
  bool finished = false;
  std::optional<checkpointing> checkpoints; ///< its slice and momentum after steps
  activity work;
  std::vector<messages::edge_stats> edges; ///< to each worker: its pulls
};

using shard_actor = caf::stateful_actor<shard_state>;

bool idle(const shard_state& st) {
  return st.core->part().empty();
}

void finish_shard(shard_actor* self) {
  auto& st = self->state;
  st.finished = true;
  auto r = activity_report(st.name, "data_parallel_shard", st.node, st.work);
  r.edges = st.edges;
  self->send(st.coordinator, final_atom::value, std::move(r));
}

/// A checkpoint of its part after `steps` steps: the slice and its momentum.
model::training_state checkpoint_of(const shard_optimizer& core) {
  model::training_state s;
  s.tensors = {{"weights", core.weights().clone()}, {"momentum", core.momentum().clone()}};
  s.version = core.steps();
  if (core.second().defined()) // adam, adamw
    s.tensors.emplace_back("second", core.second().clone());
  return s;
}

/// Takes every step whose W pushes arrived and sends the new slice to every
/// worker (then its checkpoint when due); reports once the run's last step
/// is taken.
void advance(shard_actor* self) {
  auto& st = self->state;
  use_thread_budget(st.spec.threads);
  while (!st.finished && st.core->ready()) {
    auto since = activity::clock::now();
    at::Tensor weights;
    {
      compute_scope compute{st.work};
      weights = st.core->step();
    }
    const int64_t step = st.core->steps() - 1;
    for (size_t w = 0; w < st.workers.size(); ++w) {
      st.edges[w].messages += 1;
      st.edges[w].bytes += static_cast<int64_t>(weights.nbytes());
      self->send(st.workers[w],
                 tensor_set{"ps_pull", st.name, st.spec.shard, step, 0, {weights}, {}});
    }
    after_step(self, st.coordinator, st.name, *st.checkpoints, step + 1, training_counters{},
               [&] { return checkpoint_of(*st.core); });
    st.work.add_busy(since);
  }
  if (!st.finished && st.core->steps() == st.steps)
    finish_shard(self);
}

/// A worker's gradient slice: recorded, then the steps it completes taken.
void on_push(shard_actor* self, tensor_set& t) {
  auto& st = self->state;
  if (st.finished || t.invalid || t.kind != "ps_push" || t.tensors.size() != 1 ||
      t.replica < 0 || t.replica >= st.spec.workers || idle(st))
    return fail(self, st.coordinator, st.name,
                "refused a tensor_set '" + t.kind + "' from '" + t.from +
                  "' (expected one gradient slice per worker and step, from " +
                  std::to_string(st.spec.workers) + " workers, while training)" +
                  (t.invalid ? ": " + describe(t.invalid) : std::string{}));
  st.work.begin();
  guarded(self, "parameter shard", [&] {
    if (t.step == st.spec.recovery.throw_at_step) // a fault at its step's first push
      throw std::runtime_error("injected fault: throw in step " + std::to_string(t.step) +
                               " with the push of " + t.from);
    st.core->push(t.replica, t.step, std::move(t.tensors.front()));
    advance(self);
  });
}

/// Worker `index`: the plan gives a shard every worker as a peer.
caf::result<caf::ok_atom> on_peer(shard_actor* self, const caf::actor& peer, int32_t index) {
  auto& st = self->state;
  if (index < 0 || index >= st.spec.workers)
    return make_error(errc::bad_config, st.name + ": its peers are workers 0 to " +
                                          std::to_string(st.spec.workers - 1) + ", not " +
                                          std::to_string(index));
  st.workers[static_cast<size_t>(index)] = peer;
  return caf::ok_atom::value;
}

void on_start(shard_actor* self) {
  auto& st = self->state;
  st.work.begin();
  if (std::any_of(st.workers.begin(), st.workers.end(), [](const caf::actor& w) { return !w; }))
    return fail(self, st.coordinator, st.name, "started without every worker as its peer");
  // An idle shard has nothing to do (its empty part is the same at every
  // step: its checkpoints, written now, let the job restore any step); nor
  // has any shard of a run without steps.
  if (!st.finished && idle(st))
    guarded(self, "parameter shard", [&] {
      for (int64_t v = st.core->steps() + 1; v <= st.steps; ++v)
        if (st.checkpoints->due(v)) {
          auto state = checkpoint_of(*st.core);
          state.version = v;
          st.checkpoints->save(std::move(state), training_counters{});
        }
    });
  if (!st.finished && (idle(st) || st.steps == 0))
    finish_shard(self);
}

caf::behavior shard_behavior(shard_actor* self, shard_setup setup) {
  auto& st = self->state;
  st.name = std::move(setup.name);
  st.node = std::move(setup.node);
  st.spec = std::move(setup.spec);
  st.core.emplace(std::move(setup.core));
  st.steps = setup.steps;
  st.checkpoints.emplace(st.spec.recovery);
  st.workers.resize(static_cast<size_t>(st.spec.workers));
  st.edges = edges_to(st.name, st.spec.workers, worker_name);
  return {
    observe_coordinator(self),
    answer_heartbeat(self, [] { return std::string{"the workers' pushes"}; }),
    [=](group_atom, const caf::actor& peer, int32_t index) { return on_peer(self, peer, index); },
    [=](start_atom) { on_start(self); },
    [=](tensor_set& t) { on_push(self, t); },
    stop_on_request(self, finish_shard),
    [=](fault_atom, const std::string& kind) {
      fail(self, self->state.coordinator, self->state.name, "injected fault: " + kind);
    },
  };
}

/// The shard's part of the initial weights (or of its checkpoint of
/// spec.recovery.restore_step), its optimizer and schedule.
shard_optimizer make_core(const shard_settings& spec, int64_t steps_per_epoch) {
  auto m = make_worker_model(spec.model);
  auto layout = model::make_flat_layout(m, model::freeze_point(m, spec.freeze_up_to));
  const auto part = shard_parts(layout, spec.shards)[static_cast<size_t>(spec.shard)];
  const at::Tensor flat = model::flatten(m.parameters(), layout);
  model::lr_schedule schedule{spec.optimizer.lr, spec.linear_scaling,
                              spec.workers * spec.data.plan.batch_size, spec.base_batch,
                              spec.warmup_epochs, spec.optimizer, spec.data.plan.epochs};
  shard_optimizer core{part,     model::slice(flat, part), spec.workers, spec.optimizer,
                       schedule, steps_per_epoch};
  std::vector<model::key_range> fixed;
  for (const auto& key : layout.keys)
    if (key.fixed && key.range.begin < part.end && part.begin < key.range.end)
      fixed.push_back({std::max(key.range.begin, part.begin) - part.begin,
                       std::min(key.range.end, part.end) - part.begin});
  core.keep_fixed(std::move(fixed));
  // A restored shard: its part's weights and momentum of restore_step.
  if (auto restored = checkpointing{spec.recovery}.restore())
    core.restore(restored->version, restored->at("weights"), restored->at("momentum"),
                 model::has_second_moment(spec.optimizer) ? restored->at("second") : at::Tensor{});
  return core;
}

/// Its data (the split's size) and its checkpoints, where the node lets it.
caf::error check_shard_paths(const shard_settings& spec, const path_roots& roots) {
  if (auto err = check_paths(spec.data, roots))
    return err;
  if (auto err = check_checkpoint_path(spec.model.name == "torchscript" ? spec.model.path : "",
                                           "TorchScript file", roots))
    return err;
  return check_checkpoint_path(spec.recovery.checkpoint_dir, "checkpoint directory", roots);
}

} // namespace

int64_t training_samples(const source_settings& data) {
  return model::data_size(data.data, model::split::train);
}

caf::expected<caf::actor> spawn_shard(caf::actor_system& sys,
                                      const std::string& name,
                                      const std::string& node,
                                      const shard_settings& spec) {
  try {
    const auto& plan = spec.data.plan;
    const int64_t per_epoch = model::data_parallel_steps_per_epoch(
      training_samples(spec.data), spec.workers, plan.batch_size, model::remainder_policy::pad);
    return spawn_detached(sys, name, shard_behavior,
                          shard_setup{name, node, spec, make_core(spec, per_epoch),
                                      per_epoch * plan.epochs});
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::expected<caf::actor> spawn_shard_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<shard_settings>(sys, args, parse_shard_settings, check_shard_paths,
                                           spawn_shard);
}

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
