#pragma once

// The weights of each result's best epoch by validation accuracy (the
// workload's `save: best`), kept by the coordinator of an actors' run. The
// actors that send their final weights (planned_actor::sends_weights) also
// send them after every epoch when the run keeps the best (tensor_set
// "epoch_weights", step = the epoch, run.recovery.epoch_weights), at the
// point where their weights are the epoch's: a head or a pipeline stage
// when the epoch's evaluation reaches it, a data-parallel worker or an IST
// shard at the epoch's end. Their result group's epoch report judges the
// epoch (model::epoch_selection, as the local references judge theirs):
// weights wait until then, the best epoch's are kept, the others dropped.
// The same rule in every strategy, without an actor that must know the
// accuracy. Plain data: no actor system.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "actors/runtime/job_plan.hpp"
#include "actors/runtime/job_result.hpp"
#include "messages/types.hpp"
#include "model/core/epoch_selection.hpp"

namespace baton::actors {
inline namespace runtime {

class best_epochs {
public:
  /// `plan`: its weight senders, each in its result group, or the plan's
  /// only group when it has none (pipeline stages, IST shards).
  explicit best_epochs(const job_plan& plan);

  /// Result group `group`'s epoch `epoch` (from 0) had `validation_accuracy`
  /// (-1: no validation samples: nothing to judge). An epoch judged before
  /// (reported again after a restart) changes nothing.
  void epoch(const std::string& group, int32_t epoch, double validation_accuracy);

  /// `w` (kind "epoch_weights"): what `w.from` held after epoch `w.step`.
  /// Kept while its epoch is not judged, and after if it is the best.
  void weights(messages::tensor_set w);

  /// Into `result`: each judged group's best epoch (best_epochs) and, when
  /// every weight sender's best epoch came, its weights in place of the
  /// final ones in stage_weights (saved_best). Returns "" or why the final
  /// weights stay (a sender whose best epoch never came).
  std::string finish(job_result& result) const;

  /// By sender: the epoch of the best weights kept so far, and the weights.
  const std::map<std::string, std::pair<int32_t, std::vector<at::Tensor>>>& kept() const {
    return best_;
  }

private:
  /// The result group of a weight sender ("" for another actor).
  std::string group_of(const std::string& sender) const;

  std::map<std::string, std::string> group_; ///< weight sender -> its result group
  std::map<std::string, model::epoch_selection> judged_; ///< by group
  std::map<std::string, int32_t> last_judged_;           ///< by group
  /// By sender: its weights of epochs not judged yet.
  std::map<std::string, std::map<int32_t, std::vector<at::Tensor>>> pending_;
  /// By sender: its best epoch's weights.
  std::map<std::string, std::pair<int32_t, std::vector<at::Tensor>>> best_;
};

} // namespace runtime
} // namespace baton::actors
