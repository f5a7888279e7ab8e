#pragma once

// What a run has judged its epochs by (the workload's `save: best` and
// `early_stopping`), kept in its checkpoint directory: the validation
// accuracies in DIR/epochs.json and the best epoch's weights of each weight
// sender in DIR/best-epoch/SENDER/ (a checkpoint file, step = the epoch).
// A run resumed with `--resume DIR` judges the epochs before its restart as
// the killed run did: its best epoch, its weights and the patience it has
// spent are the killed run's. Before, the resumed run judged the epochs
// after its restart only (the first of them was "the best", saved by
// --save-model, and early stopping counted its patience from there).
// Plain data and files: no actor system.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/runtime/best_epochs.hpp"
#include "actors/runtime/run_stop.hpp"

namespace baton::actors {
inline namespace runtime {

/// One result group's epoch as the coordinator judged it.
struct judged_epoch {
  std::string group;
  int32_t epoch = 0; ///< from 0
  double test_accuracy = 0;
  double validation_accuracy = -1;
};

class epoch_record {
public:
  /// Keeps the record of run `run_id` in checkpoint directory `dir` ("":
  /// none, nothing is kept) from now on. With --resume, reads it and judges
  /// its epochs into `best` and `stop` as they were judged before the
  /// restart (a stop they make begins at the next epoch reported), and
  /// hands `best` the best weights kept; a new run finds none of its own.
  void resume(std::string dir, std::string run_id, best_epochs& best, run_stop& stop);

  /// Adds `e` (with a validation accuracy, after every epoch of its group
  /// recorded; a replay after a restart is not added again) and writes the
  /// file again whole (model::try_replace_file); then keep(best), as
  /// judging `e` may have made weights that waited the best.
  void add(judged_epoch e, const best_epochs& best);

  /// Hands `w` (an "epoch_weights" set) to `best` (best_epochs::weights),
  /// then keep(best).
  void weights(best_epochs& best, messages::tensor_set w);

  /// Writes the best weights `best` keeps of each sender whose best epoch
  /// changed since they were last written. A file that cannot be written
  /// is a warning: the run goes on.
  void keep(const best_epochs& best);

private:
  /// The epochs the file holds for this run, in the order they were
  /// judged; none when it is missing or another run's (a new run in a
  /// finished run's directory). A file that cannot be read is a warning.
  std::vector<judged_epoch> read() const;
  /// Hands `best` each sender's best weights kept for this run.
  void load_kept_weights(best_epochs& best);

  std::string dir_; ///< "": nothing is kept
  std::string run_id_;
  std::vector<judged_epoch> epochs_;
  std::map<std::string, int32_t> written_; ///< by sender: the epoch of its weights on disk
};

} // namespace runtime
} // namespace baton::actors
