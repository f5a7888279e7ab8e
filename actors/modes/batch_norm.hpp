#pragma once

// What the modes whose models have batch norm check at load: batch norm in
// training normalises each channel over the samples of one step, and torch
// refuses a step of one sample (its variance is undefined), so such a
// config would fail at its first step and again at every restart. Each
// mode knows how its steps cut the data; these say what is known and how
// to refuse it, with file:line.

#include <cstdint>
#include <optional>
#include <string>

#include "actors/config/topology.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace modes {

/// The training samples when this process can know them at load: those the
/// data's headers gave where they were read here (topology::training_samples,
/// after data.train_limit, less the validation samples); else the limit
/// alone (nullopt when there is none).
std::optional<int64_t> known_training_samples(const topology& t);

/// Fails at `blame` when a training step of `model` (e.g. "model 'mlp'")
/// would have fewer than 2 samples: `how` says how the step got them
/// ("data.batch_size 1 is 1 sample per worker step").
void refuse_batch_norm_step(const config::detail::field& blame, int64_t samples,
                            const std::string& how,
                            const std::string& model);

/// The field `data.<key>` when the config gives it, else `root` (blamed
/// for a default).
config::detail::field data_key_or_root(const config::detail::field& root,
                                       const std::string& key);

} // namespace modes
} // namespace baton::actors
