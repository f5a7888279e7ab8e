#pragma once

// A strategy section's own `optimizer:` (data_parallel.optimizer,
// ist.optimizer): the older name of the workload's section, read by one rule
// for every strategy that has one.

#include <optional>

#include "actors/config/topology.hpp"
#include "actors/config/yaml_field.hpp"
#include "model/core/specs.hpp"

namespace baton::actors {
inline namespace config {
namespace detail {

/// The optimizer a strategy steps with, and the key that gave it.
struct section_optimizer {
  model::optimizer_spec optimizer;
  std::optional<field> given; ///< the section's `optimizer:` or the workload's; none: defaults
};

/// `section`'s `optimizer:` over the workload's (`t.optimizer`, else
/// `fallback`), or the workload's alone; both given is refused at the
/// section's key, naming where the workload's is.
section_optimizer read_section_optimizer(const field& root, const field& section,
                                         const topology& t,
                                         const model::optimizer_spec& fallback);

} // namespace detail
} // namespace config
} // namespace baton::actors
