#pragma once

// One run of `baton compare` or `baton bench`: the one result schema both
// write and `baton report` reads (docs/comparing.md#reportjson).
//
//   {"label": "data-parallel:ring",          what the row is called
//    "strategy": "data-parallel:ring",       the strategy (compare's name)
//    "command": "baton run W.yaml --set ...", the command that reproduces it
//    "settings": {...},                      optional: what the metrics lack
//    "metrics": {...},                       the run's metrics JSON, whole
//    "summary": {...},                       summarize(): the table's figures
//    "predicted": {...}}                     optional: the cost model's step

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace baton::apps {

/// The figures of a run's table row, from its metrics JSON (so that
/// `baton report` can summarize runs made elsewhere) and the optional
/// `settings` the metrics do not carry: {"global_batch": samples per
/// optimiser step of the whole job, "microbatches_per_step": pipeline
/// microbatches per optimiser step (gpipe, 1f1b-flush)}.
///
/// Fields: reached (bool), time_to_target_seconds (null when not reached),
/// time_estimated (true when the metrics have no epoch seconds: `--mode
/// local` before issue 34), best_accuracy, final_accuracy, epochs_run, epochs_to_target
/// (null when not reached), train_seconds, wall_seconds,
/// samples_per_second, steps (null when unknown), step_seconds,
/// bytes_per_step, bytes_per_epoch (on the wire: edges between actors of
/// different nodes), peak_rss_bytes (the largest node's), cpu_utilisation
/// (CPU seconds of the nodes during training over train_seconds x cores), time_split {compute,
/// communication, waiting} (fractions of the trainable actors' time),
/// curve [{epoch, seconds, test_accuracy}] (the first result row's).
/// `target`: the accuracy a row must reach (none: reached, time_to_target
/// is the whole training time).
nlohmann::json summarize(const nlohmann::json& metrics, std::optional<double> target,
                         const nlohmann::json& settings = nlohmann::json::object());

/// A run record as above, its summary made by summarize().
nlohmann::json run_record(const std::string& label, const std::string& strategy,
                          const std::string& command, const nlohmann::json& metrics,
                          std::optional<double> target,
                          const nlohmann::json& settings = nlohmann::json::object());

} // namespace baton::apps
