#pragma once

// Pre-training of a backbone with a classifier on one task, in one process:
// what gives transfer its frozen backbone and data-parallel workers their
// starting weights (`backbone.checkpoint`).

#include <cstdint>
#include <string>

#include "model/core/dataset.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// What to pre-train, on what, and where its checkpoint goes.
struct pretraining_settings {
  model_spec backbone;
  task task_def;
  optimizer_spec optimizer;
  batch_plan plan;
  std::string out_path;
  std::string settings; ///< stored in the checkpoint (save_checkpoint's settings)
};

/// Pre-training of a backbone + classifier on `t`: trains `epochs` epochs on
/// `train` and writes the whole model's checkpoint to `out_path`. Returns the
/// test accuracy on `test`.
double pretrain(const pretraining_settings& spec, const dataset& train, const dataset& test,
                const progress_fn& progress = {});

/// The share of `d`'s samples in `t`'s most frequent class: the accuracy of
/// a network that answers that class whatever it sees (0 for no sample).
double most_frequent_share(const task& t, const dataset& d);

/// The backbone + classifier used by pretrain (classifier layer named "fc2",
/// Linear(backbone features -> classes)); a `torchscript` backbone whose
/// output width is `classes` alone, as given. Logs which for a torchscript one.
layered_model make_pretrain_model(const model_spec& backbone, int64_t classes);

} // namespace baton::model
