#pragma once

// The machine a report's runs ran on (or that drew it), as the report's
// "machine" object.

#include <nlohmann/json.hpp>

namespace baton::apps {

/// This machine: {hostname, cpu (model name), cores (online), memory_bytes,
/// os (kernel name, release, architecture), baton (its version)}.
nlohmann::json this_machine();

} // namespace baton::apps
