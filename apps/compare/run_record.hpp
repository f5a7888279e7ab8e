#pragma once

// One run of `baton compare` or `baton bench`: the one result schema both
// write and `baton report` reads (docs/comparing.md#reportjson).
//
//   {"label": "data-parallel:ring",          what the row is called
//    "strategy": "data-parallel:ring",       the strategy (compare's name)
//    "command": "baton run W.yaml --set ...", the command that reproduces it
//    "metrics": {...},                       the run's metrics JSON, whole
//    "summary": {...},                       summarize(): the table's figures
//    "predicted": {...}}                     optional: the cost model's step

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace baton::apps {

/// The figures of a run's table row, from its metrics JSON alone (so that
/// `baton report` can summarize runs made elsewhere): reached (bool),
/// time_to_target_seconds (null when not reached), best_accuracy,
/// epochs_to_target (null when not reached), samples_per_second, steps,
/// step_seconds, bytes_per_step, bytes_per_epoch, peak_rss_bytes (the
/// largest node's), cpu_utilisation (CPU seconds over wall x cores of the
/// nodes), time_split {compute, communication, waiting} (fractions of the
/// trainable actors' time). `target`: the accuracy a row must reach (none:
/// time_to_target is the whole training time).
nlohmann::json summarize(const nlohmann::json& metrics, std::optional<double> target);

/// A run record as above, its summary made by summarize().
nlohmann::json run_record(const std::string& label, const std::string& strategy,
                          const std::string& command, const nlohmann::json& metrics,
                          std::optional<double> target);

} // namespace baton::apps
