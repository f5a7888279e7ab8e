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
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/message_handler.hpp>
#include <caf/result.hpp>

#include "actors/config/role_spec.hpp"
#include "actors/flow/activity.hpp"
#include "actors/flow/interfaces.hpp"
#include "messages/errc.hpp"
#include "messages/types.hpp"
#include "model/core/training_checkpoint.hpp"

namespace baton::actors {
inline namespace roles {

/// What a trainable actor counts; saved with its weights.
class training_counters {
public:
  epoch_sums epoch;                           ///< the epoch under way
  std::vector<messages::epoch_result> epochs; ///< epochs closed
  int64_t samples_total = 0;                  ///< training samples
  int64_t trained = 0;     ///< training microbatches trained (each once)
  int64_t duplicates = 0;  ///< training microbatches dropped as already trained

  /// Whether training microbatch `id` of step `step` was already trained,
  /// by (microbatch id, step): its step is among the `steps_done` made, or
  /// the id was seen in the step under way. Ids alone do not order: replicas
  /// upstream interleave theirs.
  bool trained_before(int64_t id, int64_t step, int64_t steps_done) const;
  /// Counts `id` of `step` as trained (when training it, not on arrival:
  /// a checkpoint must not count microbatches that were only queued).
  void admit(int64_t id, int64_t step);
  /// How many microbatches of `step` were admitted (0 for a step not under way).
  int64_t admitted_in(int64_t step) const {
    return step == current_step_ ? static_cast<int64_t>(current_ids_.size()) : 0;
  }

  std::string to_json() const;
  /// Throws model::file_error on text to_json() did not write.
  static training_counters from_json(const std::string& text);

private:
  int64_t current_step_ = -1;     ///< the step under way
  std::set<int64_t> current_ids_; ///< ids trained in it (empty at checkpoints)
};

/// Fills what every trainable actor reports alike from its counters: its
/// samples, its epochs, and the last epoch's loss and accuracy.
void report_counters(const training_counters& counters, messages::actor_report& r);

/// Tells `coordinator` the exactly-once counts of trainable actor `actor`
/// (trained_atom), before its final report.
template <class Actor>
void report_trained(Actor* self, const caf::actor& coordinator, const std::string& actor,
                    const training_counters& counters) {
  self->send(coordinator, trained_atom::value, actor, counters.trained, counters.duplicates);
}

/// Saving and restoring one trainable actor's checkpoints.
class checkpointing {
public:
  explicit checkpointing(const recovery_spec& spec);

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

  const recovery_spec& spec() const { return spec_; }

private:
  recovery_spec spec_;
};

/// Fault injection: throws (as a failing LibTorch call would) when training
/// microbatch `m` opens step spec.throw_at_step.
void maybe_throw_fault(const recovery_spec& spec, const messages::microbatch& m);

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

/// Fault injection on a sender's edge: (fault_atom, "delay" | "drop", to,
/// value) sets `downstream`'s delay (value ms) or drop step (value) to
/// receiver `to`.
template <class Fanout>
caf::result<caf::ok_atom> inject_edge_fault(Fanout& downstream, const std::string& from,
                                            const std::string& kind, const std::string& to,
                                            int64_t value) {
  bool ok = kind == "delay"   ? downstream.inject(to, std::chrono::milliseconds(value), -1)
            : kind == "drop" ? downstream.inject(to, std::chrono::milliseconds(0), value)
                             : false;
  if (!ok)
    return make_error(errc::bad_config, from + ": cannot inject '" + kind + "' on the edge to '" +
                                          to + "' (no such receiver or kind)");
  return caf::ok_atom::value;
}

/// The handlers every sender of microbatches shares (`state.downstream` a
/// fanout, `state.spec.window` its credit window): (connect_atom, receiver,
/// name) adds a receiver; (fault_atom, kind, to, value) sets a delay or drop
/// fault on an edge (inject_edge_fault); a credit frees the slot of its
/// microbatch, then `next()` runs; a credit the fanout refuses fails the
/// actor; (heartbeat_atom) answers with a heartbeat that names the credits
/// it waits for (answer_heartbeat). Put before the actor's own handlers with
/// or_else.
template <class Actor, class Next>
caf::message_handler sender_handlers(Actor* self, Next next) {
  return {
    answer_heartbeat(self, [=] {
      auto credits = self->state.downstream.blocked_on();
      return credits.empty() ? std::string{"its input (no credit window is full)"}
                             : credits;
    }),
    [=](connect_atom, const caf::actor& downstream, const std::string& name) {
      auto& st = self->state;
      st.downstream.add(downstream, st.name, name, st.spec.window);
      return caf::ok_atom::value;
    },
    [=](fault_atom, const std::string& kind, const std::string& to, int64_t value) {
      return inject_edge_fault(self->state.downstream, self->state.name, kind, to, value);
    },
    [=](const messages::credit& c) {
      auto& st = self->state;
      if (auto refused = st.downstream.take_credit(sender_of(self), c); !refused.empty())
        return fail(self, st.coordinator, st.name, "refused " + refused);
      next();
    },
  };
}

/// Fault injection on a node, in its own process: "kill" SIGKILLs it; "stop"
/// SIGSTOPs it and a forked child SIGCONTs it after `ms` milliseconds.
caf::error inject_process_fault(const std::string& kind, int32_t ms);

/// Why the checkpoint at `path`, written by run `found`, is not restored by
/// run `expected`; empty when it may be: the same run, or a checkpoint of a
/// baton before run ids (`found` empty), or a caller without a run id.
std::string foreign_checkpoint(const std::string& path, const std::string& found,
                               const std::string& expected);

/// The checkpoint directory of actor `name` under a run's directory.
std::string checkpoint_dir_of(const std::string& run_dir, const std::string& name);

/// Steps of which every one of `actors` has a valid checkpoint under
/// `run_dir` (0, the initial weights, is always one), descending.
std::vector<int64_t> common_checkpoint_steps(const std::string& run_dir,
                                             const std::vector<std::string>& actors);

} // namespace roles
} // namespace baton::actors
