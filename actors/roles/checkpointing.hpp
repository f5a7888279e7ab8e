#pragma once

// Checkpoints of trainable actors and the counters that prove every
// microbatch was trained exactly once (DESIGN.md invariant 8).
//
// Recovery is a rollback to a consistent cut: every trainable actor saves a
// checkpoint after the same optimiser steps (multiples of
// runtime.checkpoint_every). Under the synchronous schedules (gpipe,
// 1f1b-flush) and in the transfer job, step s is a cut: no microbatch of step
// s+1 has touched any weight. After a failure the coordinator restarts every
// actor of the job from the newest step that every trainable actor has a
// valid checkpoint of (step 0: the initial weights), and the source replays
// from that step. Receivers drop a training microbatch they already trained,
// by (microbatch id, step).

#include <cstdint>
#include <optional>
#include <string>

#include <caf/actor.hpp>

#include "actors/config/role_settings.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/roles/training_counters.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::actors {
inline namespace roles {

/// Saving and restoring one trainable actor's checkpoints.
class checkpointing {
public:
  explicit checkpointing(const recovery_settings& spec);

  /// Whether the step that made `version` is followed by a checkpoint.
  bool due(int64_t version) const;
  /// Writes `state` with `counters`, as a checkpoint of run spec.run_id.
  /// Throws model::error.
  void save(model::training_state state, const training_counters& counters) const;
  /// The checkpoint of spec.restore_step, or nullopt when it is 0 (start
  /// from the initial weights). Throws model::error when the file is missing
  /// or does not verify (the coordinator chose a step every actor has), or
  /// when it belongs to another run than spec.run_id (foreign_checkpoint).
  std::optional<model::training_state> restore() const;

  const recovery_settings& spec() const { return spec_; }

private:
  recovery_settings spec_;
};

/// After the optimiser step that made weight version `version` of actor
/// `name`: its step counter (what its heartbeats carry, activity.hpp) is
/// `version`; writes the checkpoint when due (`state` is called only then) and
/// tells the coordinator of `version` from spec.notify_from_step on.
template <class Self, class StateFn>
void after_step(Self* self, const caf::actor& coordinator, const std::string& name,
                const checkpointing& checkpoints, int64_t version,
                const training_counters& counters, StateFn state) {
  self->state.work.advanced_to(version);
  if (checkpoints.due(version))
    checkpoints.save(state(), counters);
  auto from = checkpoints.spec().notify_from_step;
  if (from >= 0 && version >= from)
    self->send(coordinator, step_atom::value, name, version);
}

/// Why the checkpoint at `path`, written by run `found`, is not restored by
/// run `expected`; empty when it may be: the same run, or a checkpoint of a
/// baton before run ids (`found` empty), or a caller without a run id.
std::string foreign_checkpoint(const std::string& path, const std::string& found,
                               const std::string& expected);

/// The checkpoint directory of actor `name` under a run's directory.
std::string checkpoint_dir_of(const std::string& run_dir, const std::string& name);

} // namespace roles
} // namespace baton::actors
