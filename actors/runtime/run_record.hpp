#pragma once

// The run record: the topology and `--set` options a run was started with,
// written as run.yaml into its checkpoint directory, so that `--resume DIR`
// needs nothing else and refuses to continue the checkpoints with other
// training settings (a mixed run would train neither configuration).

#include <map>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace baton::actors {
inline namespace runtime {

/// What a run was configured with, which run it is and whether it finished.
struct run_record {
  std::string topology_file;          ///< absolute path; empty: the built-in default
  std::string topology_text;          ///< the file's text when the run started
  std::vector<std::string> overrides; ///< its `--set` options, without `--fault`s
  /// The run's id (new_run_id), written into each of its checkpoints; kept
  /// by `--resume` and a restart. Empty in the record of a baton before ids.
  std::string run_id;
  /// Set when the run finished (its outputs written): the newest step its
  /// trainable actors all have a checkpoint of; -1 while it has not finished.
  int64_t finished_step = -1;
  /// Its outputs, absolute ("" none), recorded when it starts: `--resume`
  /// writes them again unless its own command line names them
  /// (with_recorded_outputs, jobs.hpp).
  std::string metrics_file; ///< its --metrics-out
  std::string curves_file;  ///< its --curves
  std::string trace_file;   ///< its --trace
  std::string model_file;   ///< its --save-model
  /// Its trainable actors: the directories it made in the checkpoint
  /// directory (a new run on a finished run's directory removes that run's
  /// checkpoints from these only). Empty in the record of an older baton.
  std::vector<std::string> actors;
};

/// The most a run record may take, as run.yaml: what read_run_record reads,
/// and so what write_run_record writes.
inline constexpr size_t max_record_bytes = size_t{1} << 20;

/// A fresh random run id (32 hex digits).
std::string new_run_id();

/// The record's file in a checkpoint directory.
std::string run_record_path(const std::string& checkpoint_dir);

/// Whether `dir` has a run record (checkpoints of an older baton have none).
bool has_run_record(const std::string& dir);

/// errc::bad_config when `record` would take more than max_record_bytes as
/// run.yaml (a topology and many long `--set` options): a run refuses to
/// start rather than write a record its `--resume` could not read.
caf::error check_record_size(const run_record& record);

/// The record of a new run (a new id, new_run_id) from its topology file
/// (empty: the built-in default), the text the run parsed (the file as it
/// was read, never read again) and its `--set` options. Fault overrides are
/// left out: a resumed run injects the faults it is given, not the killed
/// run's.
run_record make_run_record(const std::string& topology_file, const std::string& text,
                           const std::vector<std::string>& overrides);

/// Writes `record` to run_record_path(dir) (temporary file + rename);
/// refuses one over max_record_bytes (check_record_size).
caf::error write_run_record(const std::string& dir, const run_record& record);

/// Reads run_record_path(dir); errc::bad_file naming the file when it is
/// missing, unreadable or malformed.
caf::expected<run_record> read_run_record(const std::string& dir);

/// The settings that decide what a run trains, from every scalar of a
/// topology document (`values`: dotted path -> text, as topology_values
/// gives): everything except `runtime`, `target_accuracy`, `faults`, `nodes` and placement keys
/// (`node`, `nodes`, `place`), which may change between a run and its resume.
std::map<std::string, std::string>
training_settings(const std::map<std::string, std::string>& values);

/// "data.batch_size: 64 then, 32 now; ..." for every training setting that
/// differs, or empty when they are the same.
std::string settings_difference(const std::map<std::string, std::string>& then,
                                const std::map<std::string, std::string>& now);

} // namespace runtime
} // namespace baton::actors
