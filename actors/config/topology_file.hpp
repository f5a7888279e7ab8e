#pragma once

// Reading a topology file: the one place its text is read from disk, for
// the parser (load_topology) and for what records the text a run was
// started with (`--resume`'s run record).

#include <string>

#include <caf/expected.hpp>

namespace baton::actors {
inline namespace config {

/// The text of the topology file at `path`; errc::bad_config "cannot read
/// topology file 'PATH': WHY" when it cannot be read (missing, a directory,
/// a device, over the size limit: detail::read_config_file).
caf::expected<std::string> read_topology_file(const std::string& path);

} // namespace config
} // namespace baton::actors
