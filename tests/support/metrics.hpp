#pragma once

// A job run to its end and the metrics file (--metrics-out) it wrote.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/scratch_dir.hpp"

namespace baton::testing {

/// The JSON in the file at `path`; a discarded value (is_discarded()) when
/// the file is missing or is not JSON.
nlohmann::json read_json(const std::string& path);

/// Runs `baton ARGS... --metrics-out DIR/NAME.json`, expects exit code 0
/// (a test failure with baton's output otherwise) and returns the metrics.
nlohmann::json run_job(const scratch_dir& dir, std::vector<std::string> args,
                       const std::string& name);

/// run_job, once per test process for the same `args` in the same `dir`:
/// the cases of a suite that compare with the same reference run (a
/// fault-free job, a --mode local run) share it; its metrics are in
/// NAME.json of the first case that asked. A failed run is not run again.
const nlohmann::json& shared_run(const scratch_dir& dir, const std::vector<std::string>& args,
                                 const std::string& name);

/// The weights digest of every actor in `metrics` that reports one (the
/// trainable actors), by actor name; only those of `role` when it is given
/// ("head", "pipeline_stage").
std::map<std::string, std::string> digests_by_actor(const nlohmann::json& metrics,
                                                    const std::string& role = "");

/// Expects `metrics` to count `steps` trained steps for every trainable
/// actor (its "trained" section) and `actors` x `steps` in all: each actor
/// trained each of its steps once.
void expect_steps_trained(const nlohmann::json& metrics, int32_t actors, int64_t steps);

/// A job run by its actors and by --mode local (with `local_only` too, such
/// as --threads), each with --save-model into the scratch directory: their
/// metrics and the two models' paths.
struct saved_runs {
  nlohmann::json actors, local;
  std::string actors_model, local_model;
};
saved_runs run_both_saving(const scratch_dir& dir, const std::vector<std::string>& args,
                           const std::string& name,
                           const std::vector<std::string>& local_only = {});

/// Expects the first result of `actors` (a run that saved a model) and of
/// `local` (its --mode local) to have `epochs` epochs with the same test and
/// validation accuracies, the same best epoch, and `actors` to have saved
/// that epoch's weights ("saved": "best").
void expect_same_best_epoch(const nlohmann::json& actors, const nlohmann::json& local,
                            size_t epochs);

} // namespace baton::testing
