#pragma once

// The run's length for a learning-rate schedule of the modes whose trainers
// never see the data (pipeline stages, transfer heads): the plan counts
// their steps from the training samples, read where the run is planned, and
// the source refuses to start on a training split of another size
// (source_settings::train_samples), so a stage never steps along a schedule
// of another run's length.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include "actors/config/topology.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace modes {

/// At parse time, when `o` is scheduled: the training samples of an epoch
/// (topology::training_samples), which the data's reader has where this
/// process reads the files; where listed nodes read them, their headers are
/// read here once. Fails at `blame` when this host cannot read them: `who`
/// steps ("job: pipeline's stages").
void count_schedule_samples(const config::detail::field& blame, const model::optimizer_spec& o,
                            topology& t, const std::string& who);

/// The training samples the parse counted for a plan, or errc::bad_config
/// naming `who` when it counted none (a topology not made by the parser).
caf::expected<int64_t> planned_training_samples(const topology& t, const std::string& who);

} // namespace modes
} // namespace baton::actors
