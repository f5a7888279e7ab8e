#include "actors/modes/transfer/stage.hpp"

#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <caf/all.hpp>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "actors/config/yaml_codec.hpp"
#include "actors/flow/activity.hpp"
#include "actors/flow/compute_thread.hpp"
#include "actors/flow/role_handlers.hpp"
#include "actors/flow/failure.hpp"
#include "actors/flow/error_of.hpp"
#include "actors/flow/fanout.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/roles/sender_handlers.hpp"
#include "messages/codec.hpp"
#include "messages/errc.hpp"
#include "messages/type_ids.hpp"
#include "messages/types.hpp"
#include "model/core/checkpoint.hpp"
#include "model/core/layered_model.hpp"

namespace baton::actors {
inline namespace modes {
namespace transfer {

namespace {

using messages::control;
using messages::control_kind;
using messages::microbatch;

struct stage_state {
  std::string name;
  std::string node;
  stage_settings spec;
  /// Its layers, with the feature cache when spec.features asks for one.
  std::optional<model::frozen_backbone> backbone;
  /// The whole backbone its layers are a slice of, shared with the other
  /// stages of this process (whole_backbone): kept while a stage lives.
  std::shared_ptr<const model::layered_model> whole;

  caf::actor coordinator;
  caf::actor upstream; ///< the sender of the microbatches: credits go back to it
  fanout downstream{dealing::broadcast}; ///< the next stage, or every head
  std::deque<std::variant<microbatch, control>> inputs;
  activity work;
  bool finished = false;
};

using stage_actor = caf::stateful_actor<stage_state>;

void send_report(stage_actor* self) {
  auto& st = self->state;
  auto report = activity_report(st.name, "stage", st.node, st.work);
  report.edges = st.downstream.edges();
  report_features(*st.backbone, report);
  self->send(st.coordinator, final_atom::value, std::move(report));
}

void forward_control(stage_actor* self, const control& c) {
  auto& st = self->state;
  st.downstream.broadcast(self, c);
  // Every microbatch of the epoch came before it: its counts are complete.
  if (c.kind == control_kind::epoch_end)
    st.backbone->end_epoch();
  if (c.kind == control_kind::end_of_stream) {
    st.finished = true;
    send_report(self);
  }
}

/// Runs the layers on one microbatch and sends the result to every receiver.
/// Returns false when LibTorch failed (the actor then fails).
bool process(stage_actor* self, microbatch m, const caf::actor& upstream) {
  auto& st = self->state;
  // Free the upstream slot first: the next transfer overlaps this compute.
  self->send(upstream, messages::credit{m.id, 1, {}});
  auto since = activity::clock::now();
  auto computed = guarded(self, "forward of microbatch " + std::to_string(m.id) + " failed", [&] {
    use_thread_budget(st.spec.threads);
    m.payload = st.backbone->features(m.payload, m.samples, m.eval);
  });
  if (!computed)
    return false;
  st.work.add_busy(since);
  auto step = m.step;
  st.downstream.send(self, std::move(m));
  if (st.downstream.dropped_last())
    self->send(st.coordinator, fault_atom::value, std::string{"dropped"}, st.name, step);
  return true;
}

/// Acts while the front input can go: a control always, a microbatch when
/// every receiver has a credit.
void act(stage_actor* self) {
  auto& st = self->state;
  while (!st.inputs.empty()) {
    if (auto* c = std::get_if<control>(&st.inputs.front())) {
      auto copy = std::move(*c);
      st.inputs.pop_front();
      forward_control(self, copy);
      continue;
    }
    if (!st.downstream.can_send(std::get<microbatch>(st.inputs.front())))
      return;
    auto m = std::move(std::get<microbatch>(st.inputs.front()));
    st.inputs.pop_front();
    if (!process(self, std::move(m), st.upstream))
      return;
  }
}

struct stage_setup {
  std::string name;
  std::string node;
  stage_settings spec;
  model::frozen_backbone backbone; ///< built once, where the spawn checks it
  std::shared_ptr<const model::layered_model> whole;
};

caf::behavior stage_behavior(stage_actor* self, stage_setup setup) {
  auto& init = self->state;
  init.name = std::move(setup.name);
  init.node = std::move(setup.node);
  init.backbone.emplace(std::move(setup.backbone));
  init.whole = std::move(setup.whole);
  init.spec = std::move(setup.spec);
  caf::message_handler own{
    observe_coordinator(self),
    [=](microbatch& m) {
      auto& st = self->state;
      if (m.invalid)
        return fail(self, st.coordinator, st.name,
                    "refused a microbatch that could not be decoded: " + describe(m.invalid));
      st.work.begin();
      st.upstream = sender_of(self);
      st.inputs.emplace_back(std::move(m));
      act(self);
    },
    [=](control& c) {
      if (c.invalid)
        return fail(self, self->state.coordinator, self->state.name,
                    "refused a control message: " + describe(c.invalid));
      self->state.inputs.emplace_back(std::move(c));
      act(self);
    },
  };
  return sender_handlers(self, [=] { act(self); }).or_else(own);
}

} // namespace

void report_features(const model::frozen_backbone& backbone, messages::actor_report& report) {
  const model::feature_counts all = backbone.total();
  auto figure = [&](const char* name, int64_t value) {
    report.figures.push_back({name, static_cast<double>(value)});
  };
  figure("feature_block", backbone.spec().block_rows);
  figure("backbone_train_samples", all.train_samples);
  figure("backbone_train_computed", all.train_computed);
  figure("backbone_eval_samples", all.eval_samples);
  figure("backbone_eval_computed", all.eval_computed);
  figure("backbone_forward_rows", all.forward_rows);
  if (backbone.spec().cache) {
    const model::cache_stats cache = backbone.stats();
    figure("cache_hits", cache.hits);
    figure("cache_misses", cache.misses);
    figure("cache_rejected", cache.rejected);
    figure("cache_entries", cache.entries);
    figure("cache_bytes", cache.bytes);
  }
  for (size_t e = 0; e < backbone.epochs().size(); ++e) {
    const model::feature_counts& c = backbone.epochs()[e];
    report.events.push_back(nlohmann::json{{"event", "backbone_epoch"},
                                           {"epoch", e + 1}, // from 1, as every epoch
                                           {"train_samples", c.train_samples},
                                           {"train_computed", c.train_computed},
                                           {"eval_samples", c.eval_samples},
                                           {"eval_computed", c.eval_computed},
                                           {"forward_rows", c.forward_rows}}
                              .dump());
  }
}

namespace {

namespace fs = std::filesystem;

/// A file's size and modification time ("" when it is absent or unnamed):
/// a file written again between two spawns is read again.
std::string file_identity(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec))
    return {};
  auto size = fs::file_size(path, ec);
  auto written = fs::last_write_time(path, ec).time_since_epoch().count();
  return path + ":" + std::to_string(size) + ":" + std::to_string(written);
}

} // namespace

std::shared_ptr<const model::layered_model> whole_backbone(const stage_settings& spec) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const model::layered_model>> built;
  const auto key = write_yaml(spec.backbone) + "\n" + file_identity(spec.backbone.path) + "\n" +
                   spec.checkpoint + "\n" + file_identity(spec.checkpoint);
  std::lock_guard<std::mutex> lock{mutex};
  for (auto it = built.begin(); it != built.end();)
    it = it->second.expired() ? built.erase(it) : std::next(it);
  if (auto kept = built[key].lock())
    return kept;
  auto whole = model::make_model(spec.backbone);
  if (!spec.checkpoint.empty())
    model::load_checkpoint(whole, spec.checkpoint);
  whole.set_trainable(false);
  whole.train(false);
  auto shared = std::make_shared<const model::layered_model>(std::move(whole));
  built[key] = shared;
  return shared;
}

caf::expected<caf::actor> spawn_stage(caf::actor_system& sys, const std::string& name,
                                      const std::string& node, const stage_settings& spec) {
  try {
    auto whole = whole_backbone(spec);
    if (static_cast<size_t>(spec.end) > whole->size())
      return make_error(errc::bad_config,
                        name + ": layers [" + std::to_string(spec.begin) + ", " +
                          std::to_string(spec.end) + ") exceed the backbone's " +
                          std::to_string(whole->size()) + " layers");
    if (spec.features.cache && spec.begin != 0)
      return make_error(errc::bad_config, name + ": a feature cache needs the stage that takes "
                                                 "the source's samples (layers from 0)");
    // Throws on a spec it refuses, before the actor exists.
    model::frozen_backbone backbone{whole->slice(spec.begin, spec.end), spec.features};
    stage_setup setup{name, node, spec, std::move(backbone), std::move(whole)};
    return spawn_detached(sys, name, stage_behavior, std::move(setup));
  } catch (const std::exception& e) {
    return error_of(e, name);
  }
}

caf::error check_paths(const stage_settings& spec, const path_roots& roots) {
  if (auto err = check_checkpoint_path(spec.checkpoint, "checkpoint", roots))
    return err;
  return check_checkpoint_path(spec.backbone.path, "TorchScript file", roots);
}

caf::expected<caf::actor> spawn_stage_role(caf::actor_system& sys, const spawn_args& args) {
  return parse_check_spawn<stage_settings>(sys, args, parse_stage_settings, check_paths, spawn_stage);
}

} // namespace transfer
} // namespace modes
} // namespace baton::actors
