#pragma once

// The run's length for a learning-rate schedule of the modes whose trainers
// never see the data (pipeline stages, transfer heads): the plan counts
// their steps from the training samples, read where the run is planned, and
// the source refuses to start on a training split of another size
// (source_settings::train_samples), so a stage never steps along a schedule
// of another run's length.

#include <cstdint>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace modes {

/// The samples of a training epoch as the source reads them
/// (model::data_size: after data.train_limit, less the validation samples),
/// from the data's headers read here; nullopt when they cannot be read here
/// (the files are on another host).
std::optional<int64_t> training_samples_here(const topology& t);

/// training_samples_here for a plan, or errc::bad_config naming `who`
/// ("job: pipeline's stages") when the data cannot be read here (the parser
/// refused that already, unless the files went away since).
caf::expected<int64_t> planned_training_samples(const topology& t, const std::string& who);

/// Fails at `blame` when `o` is scheduled and training_samples_here has no
/// answer: `who` steps ("job: pipeline's stages").
void refuse_unknown_length(const config::detail::field& blame, const model::optimizer_spec& o,
                           const topology& t, const std::string& who);

} // namespace modes
} // namespace baton::actors
