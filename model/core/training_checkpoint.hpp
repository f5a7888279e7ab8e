#pragma once

// Checkpoints of a trainable actor (pipeline stage, head), from which a
// restarted actor resumes: everything its training depends on, saved every N
// optimiser steps so that a failure costs at most N steps of replay.
//
// A file is "BATONCKPT 1 <sha256 hex> <payload bytes>\n" followed by the
// payload (a torch::serialize archive). Writing goes to a temporary file that
// is fsync'ed, renamed over the target and the directory fsync'ed: a crash
// leaves the old file or the new one, never half of one. Reading checks the
// header, the length and the checksum, so a truncated or corrupt file is
// detected (and the store falls back to an older one).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace baton::model {

/// What a trainable actor needs to continue exactly where it was.
struct training_state {
  /// Named tensors: parameters, buffers, optimiser state (the trainer's
  /// names; the store does not interpret them).
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  int64_t version = 0;  ///< weight version (optimiser steps taken)
  std::string counters; ///< the actor's own bookkeeping (JSON), opaque here
  /// The run that wrote it ("": a baton before run ids); the store keeps it,
  /// the caller decides whose checkpoints it may restore.
  std::string run_id;

  /// The tensor called `name`; throws model::error naming it when absent.
  const at::Tensor& at(const std::string& name) const;
  /// The tensor called `name`, checked to have the shape and type of
  /// `like`; throws model::error naming it otherwise.
  const at::Tensor& matching(const std::string& name, const at::Tensor& like) const;
};

/// One actor's checkpoints in a directory: step-<version>.ckpt, the newest
/// `keep` files kept.
class checkpoint_store {
public:
  explicit checkpoint_store(std::string dir, int32_t keep = 3);

  /// Writes `s` as the checkpoint of step s.version, atomically and durably,
  /// then deletes the oldest files beyond `keep` and the temporary files of
  /// a writer killed mid-save. Throws model::error.
  void save(const training_state& s) const;

  /// Steps with a checkpoint file whose checksum verifies, ascending.
  std::vector<int64_t> valid_steps() const;

  /// The checkpoint of `step`; throws model::error naming the file when it
  /// is missing, truncated or corrupt.
  training_state load(int64_t step) const;

  /// The newest checkpoint at or before `step` that verifies, skipping (and
  /// logging through `skipped`) the corrupt ones; nullopt when none does.
  std::optional<training_state> load_newest(int64_t at_most,
                                            std::vector<std::string>* skipped = nullptr) const;

  std::string path_of(int64_t step) const;
  const std::string& dir() const { return dir_; }

private:
  std::vector<int64_t> steps_on_disk() const;
  /// Removes step-N.ckpt.tmp.* files a killed writer left behind.
  void remove_stale_temporaries() const;
  /// The file's payload after checking header, length and checksum.
  std::string verified_payload(int64_t step) const;

  std::string dir_;
  int32_t keep_;
};

} // namespace baton::model
