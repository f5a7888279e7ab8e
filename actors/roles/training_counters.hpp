#pragma once

// What a trainable actor counts (microbatches trained, each once; its
// epochs) and reports; saved with its weights (actors/roles/checkpointing.hpp).

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>

#include "actors/config/role_settings.hpp"
#include "actors/flow/epoch_sums.hpp"
#include "actors/flow/protocols.hpp"
#include "actors/flow/tensor_parts.hpp"
#include "messages/types.hpp"

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

/// Closes the epoch under way as `epoch` and sends `coordinator` the actor's
/// report of it (epoch_atom): `make_report()`, made once the epoch is
/// counted, with that epoch alone.
template <class Actor, class MakeReport>
void close_epoch(Actor* self, const caf::actor& coordinator, training_counters& counters,
                 int32_t epoch, MakeReport&& make_report) {
  counters.epochs.push_back(counters.epoch.close(epoch));
  messages::actor_report report = make_report();
  report.epochs = {counters.epochs.back()};
  self->send(coordinator, epoch_atom::value, std::move(report));
}

/// With `recovery.epoch_weights` (--save-model with save: best): sends
/// `coordinator` what trainable actor `name` (replica `replica`) holds after
/// epoch `epoch`, `state` (layered_model::state(), or a shard's owned
/// tensors), copied: tensor_set "epoch_weights" with step = the epoch
/// (actors/runtime/best_epochs.hpp).
template <class Actor>
void send_epoch_weights(Actor* self, const caf::actor& coordinator,
                        const recovery_settings& recovery, const std::string& name,
                        int32_t replica, int32_t epoch, const std::vector<at::Tensor>& state) {
  if (!recovery.epoch_weights)
    return;
  messages::tensor_set w{"epoch_weights", name, replica, epoch, 0, {}, {}};
  for (const auto& t : state)
    w.tensors.push_back(t.detach().clone()); // it trains on in place
  send_in_parts(self, coordinator, std::move(w));
}

} // namespace roles
} // namespace baton::actors
