#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "actors/config/role_settings.hpp"
#include "actors/config/topology.hpp"
#include "actors/roles/role_type.hpp"
#include "model/core/dataset.hpp"

namespace baton::actors {
inline namespace roles {

/// The source settings of a topology: its data, batch plan, tasks and window.
source_settings make_source_settings(const topology& t);

/// The training part, the validation samples and the test split a source
/// with `spec` reads (model::load_splits). The local loops load through this
/// too, so that they see exactly the data the actors see.
caf::expected<model::data_splits> load_source_data(const source_settings& spec);

/// The splits load_source_data reads, their labels mapped to `task`'s: what
/// the workers of a mode that trains one task (and its local reference)
/// train and test on.
caf::expected<model::data_splits> load_task_data(const source_settings& spec,
                                                 const model::task& task);

/// Loads the source's dataset (errors are returned, nothing is spawned) and
/// spawns a detached source actor named `name` on this process.
///
/// Emission order, per epoch e: the training microbatches of e (plan_epoch,
/// augmented as the data says: model::gather_training), then the test split
/// as eval microbatches (plan_eval), then the validation samples as eval
/// microbatches marked `validation` (none without data.validation), then
/// control{epoch_end, e}; after the last epoch control{end_of_stream}.
/// Microbatches wait for a credit of the downstream window; controls do not.
caf::expected<caf::actor> spawn_source(caf::actor_system& sys, const std::string& name,
                                       const std::string& node, const source_settings& spec);

/// Refuses (errc::bad_file) a source whose settings read a file outside the
/// node's roots: its dataset directory (npy: its files) against `data_dirs` (not for the
/// synthetic data set).
caf::error check_paths(const source_settings& spec, const path_roots& roots);

/// The `source` role of a node's role table: parses the settings, checks
/// their files (check_paths) and spawns; starts nothing on any error.
caf::expected<caf::actor> spawn_source_role(caf::actor_system& sys, const spawn_args& args);

} // namespace roles
} // namespace baton::actors
