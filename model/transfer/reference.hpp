#pragma once

// Transfer's `--mode local`: the transfer job in one process, one plain
// loop, no actors. It is the reference the actor runtime is checked against
// (same data order, same microbatches, same arithmetic) and the baseline
// that `--baseline separate` runs once per head.

#include <vector>

#include "model/core/dataset.hpp"
#include "model/core/feature_cache.hpp"
#include "model/core/head_loop.hpp"
#include "model/core/layered_model.hpp"
#include "model/core/specs.hpp"

namespace baton::model {

/// Trains `heads` on the frozen `backbone` features in one loop: every
/// microbatch is forwarded through the backbone once and given to every head.
/// With one head this is exactly what one separate baseline process does.
std::vector<head_result> run_transfer_local(const layered_model& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress = {});

/// The same with the backbone's features computed (and cached) as
/// `backbone` says, as the transfer job's stage computes them; each epoch
/// (training, then evaluation) ends with backbone.end_epoch().
std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const dataset& train, const dataset& test,
                                            const batch_plan& plan,
                                            const progress_fn& progress = {});

/// The same on data.train, evaluated on data.test and then data.validation
/// (when it has samples, as the source sends them): each head keeps its
/// best epoch's weights with selection.keep_best, and the run stops once
/// every head went selection.patience epochs without a better one.
std::vector<head_result> run_transfer_local(frozen_backbone& backbone,
                                            const std::vector<head_spec>& heads,
                                            const data_splits& data, const batch_plan& plan,
                                            const selection_spec& selection,
                                            const progress_fn& progress = {});

} // namespace baton::model
