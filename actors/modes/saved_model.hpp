#pragma once

// `--save-model FILE` (docs/exporting.md): what every mode's save_model hook
// shares. A mode rebuilds its trained model from the final weights its
// actors sent (job_result::stage_weights: each a layered_model::state(), in
// its order) and writes it with model/core/export.hpp as a TorchScript
// module that `torch.jit.load(FILE)` runs in plain PyTorch.

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <caf/expected.hpp>

#include "actors/runtime/job_result.hpp"
#include "model/core/export.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace modes {

/// The final weights the actor `actor` sent in `result`; actor_failed
/// naming it when it sent none (it failed, or the run stopped first).
caf::expected<const std::vector<at::Tensor>*> sent_weights(const job_result& result,
                                                           const std::string& actor);

/// Copies `sent` (`who`'s final weights) into m.state(); actor_failed naming
/// `who` when their count, a shape or a type differs (m is then unchanged).
caf::error put_sent_weights(model::layered_model& m, const std::vector<at::Tensor>& sent,
                            const std::string& who);

/// What the export of a model built from `spec` and trained on `data`
/// needs: its TorchScript file when it is a `torchscript` model, and the
/// data's normalisation (the module's first step on raw samples).
model::export_options export_options_of(const model::model_spec& spec,
                                        const model::data_spec& data, const job_result& result);

/// The normalisation an export starts with: the one the run's outputs
/// computed (`result.normalisation`, set once by write_outputs), else the
/// data's, read now (model::data_normalisation; throws where it cannot be).
model::input_normalisation export_normalisation(const model::data_spec& data,
                                                const job_result& result);

/// Runs `write` (which writes `path`) and returns its error; an exception
/// becomes bad_file "cannot save the model to PATH: WHAT".
caf::expected<void> saving(const std::string& path, const std::function<caf::error()>& write);

} // namespace modes
} // namespace baton::actors
