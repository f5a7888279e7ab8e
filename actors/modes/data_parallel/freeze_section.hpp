#pragma once

// The keys of the `data_parallel:` section that choose what a worker trains
// and how often it exchanges: `task`, `sync_every` (local SGD), `freeze` (a fixed or
// adaptive frozen prefix and its feature cache) and, from the common
// sections, `backbone.checkpoint` (a pretrained backbone). Every refusal
// names the file and line of the key at fault, as the reference
// (model::run_data_parallel_local) would refuse the same settings.

#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"
#include "actors/modes/data_parallel/section.hpp"

namespace baton::actors {
inline namespace modes {
namespace data_parallel {

/// The freezable groups AutoFreeze watches when `freeze.groups` is not
/// given: the model's natural blocks (convnet: pool1, pool2, pool3, relu6;
/// resnet18: its four stages; mlp: relu1, relu2). Empty for another model.
std::vector<std::string> default_freeze_groups(const std::string& model);

/// Reads `task`, `sync_every` and `freeze` of `section` into `s` (the model is
/// t.backbone, already chosen) and checks `backbone.checkpoint` against the
/// model. Throws config_error with file:line on an unknown layer (naming the
/// valid ones), groups out of model order, adaptive freezing with
/// sync_every > 0 or exchange: ps, local SGD with exchange: ps, a cached
/// prefix whose output depends on the batch, or a checkpoint for the mlp.
void read_freezing(const detail::field& root, const detail::field& section, const topology& t,
                   section_spec& s);

/// The keys of `data_parallel.freeze` (for the schema).
const std::vector<std::string>& freeze_keys();

} // namespace data_parallel
} // namespace modes
} // namespace baton::actors
