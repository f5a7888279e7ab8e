// A run's outputs, in one place: checked before anything trains, then
// written from the finished run (the results table, the files asked for,
// the run record's finished step).
#include "actors/modes/run_outputs.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/flow/trace.hpp"
#include "actors/modes/mode.hpp"
#include "actors/runtime/curves.hpp"
#include "actors/runtime/jobs.hpp"
#include "actors/runtime/run_record.hpp"
#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"
#include "model/core/dataset.hpp"

namespace baton::actors {
inline namespace modes {

namespace {

/// A file a run will write, and the flag that named it.
struct output_file {
  std::string flag; ///< "--metrics-out"
  std::string path; ///< empty: not asked for
};

caf::error refuse(const output_file& out, const std::string& why) {
  return make_error(errc::bad_file, out.flag + " " + out.path + ": " + why);
}

/// Creates and removes the temporary file the output is written through.
caf::error check_writable(const output_file& out) {
  // A link, a directory, a device or a pipe, which the rename that writes
  // the file would replace.
  if (auto why = model::replacement_refusal(out.path); !why.empty())
    return refuse(out, why);
  if (auto why = model::missing_directory(out.path); !why.empty())
    return refuse(out, why);
  // A new temporary file of its own name (never one that is there: a link
  // at OUT.tmp once had the check create the file it pointed to), as the
  // write will; a symbolic link at the output itself is refused.
  if (auto why = model::try_check_writable(out.path); !why.empty())
    return refuse(out, why);
  return caf::none;
}

/// Each of `outputs` checked against `inputs` and the outputs before it.
caf::error check_files(const std::vector<output_file>& outputs,
                       const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& out = outputs[i];
    if (out.path.empty())
      continue;
    for (const auto& in : inputs)
      if (!in.empty() && model::same_file(out.path, in))
        return refuse(out, "is an input of this run (" + in + "); it would be overwritten");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && model::same_file(out.path, outputs[j].path))
        return refuse(out, "is also the file of " + outputs[j].flag);
    if (auto err = check_writable(out))
      return err;
  }
  return caf::none;
}

/// The data's normalisation for the metrics and the saved model, computed
/// once; none (said in the log) where the training files are not read here
/// (on listed nodes, or gone): a save then reads them itself, and fails
/// with the reason.
std::optional<model::input_normalisation> normalisation_of(const topology& t) {
  try {
    return model::data_normalisation(t.data);
  } catch (const std::exception& e) {
    spdlog::info("the outputs go without the data's normalisation (the data is not read here: "
                 "{})",
                 e.what());
    return std::nullopt;
  }
}

} // namespace

caf::error check_outputs(const run_request& r, const topology& t) {
  auto outputs = std::vector<output_file>{{"--metrics-out", r.metrics_out},
                                          {"--curves", r.curves},
                                          {"--trace", r.trace_out},
                                          {"--save-model", r.save_model}};
  auto inputs = std::vector<std::string>{t.file, t.checkpoint, t.backbone.path};
  if (!r.resume_dir.empty())
    inputs.push_back(run_record_path(r.resume_dir));
  return check_files(outputs, inputs);
}

std::vector<std::string> untrained_results(const topology& t, const job_result& result) {
  // A loss within this of ln C has not moved from the uniform answer (the
  // rows of a fine-tuning from a collapsed checkpoint: 2.3020-2.3031 against
  // ln 10 = 2.3026).
  constexpr double margin = 0.01;
  std::vector<std::string> out;
  for (const auto& h : result.heads) {
    const model::task* task = t.find_task(h.task);
    if (task == nullptr || task->classes < 2 || h.epochs.empty() || !std::isfinite(h.train_loss))
      continue;
    const double uniform = std::log(static_cast<double>(task->classes));
    if (h.train_loss < uniform - margin)
      continue;
    out.push_back(fmt::format(
      "'{}' learned nothing: its training loss ended at {:.4f}, the loss of answering {}'s {} "
      "classes alike (ln {} = {:.4f}). The usual causes: a backbone checkpoint whose "
      "pretraining collapsed (`baton pretrain` warns of one), too small or too large an lr for "
      "its steps, or too few steps",
      h.actor, h.train_loss, task->name, task->classes, task->classes, uniform));
  }
  return out;
}

caf::error write_outputs(const run_request& r, const topology& t, const mode& job,
                         job_result& result) {
  // The table first: what was trained is shown even if a file fails.
  std::printf("%s", results_table(result).c_str());
  std::fflush(stdout);
  for (const auto& warning : untrained_results(t, result))
    spdlog::warn("{}", warning);
  if (!r.metrics_out.empty() || !r.save_model.empty())
    result.normalisation = normalisation_of(t);
  if (!r.metrics_out.empty()) {
    if (auto ok = write_metrics(result, r.metrics_out); !ok)
      return ok.error();
  }
  if (!r.curves.empty())
    if (auto ok = write_curves(result, r.curves); !ok)
      return ok.error();
  if (!r.trace_out.empty())
    if (auto err = write_chrome_trace(r.trace_out, result.actors))
      return err;
  if (!r.save_model.empty()) {
    if (job.save_model == nullptr)
      return make_error(errc::bad_config, "--save-model: job: " + t.job + " saves no model");
    if (auto ok = job.save_model(t, result, r.save_model); !ok)
      return ok.error();
  }
  // Only now: a run whose outputs failed may still be resumed.
  record_finished(r, result);
  if (!r.metrics_out.empty())
    std::printf("metrics written to %s\n", r.metrics_out.c_str());
  if (!r.trace_out.empty())
    std::printf("trace written to %s (open in https://ui.perfetto.dev)\n", r.trace_out.c_str());
  if (!r.save_model.empty())
    std::printf("model saved to %s\n", r.save_model.c_str());
  return caf::none;
}

} // namespace modes
} // namespace baton::actors
