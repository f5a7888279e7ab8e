#pragma once

// What the modes whose workers train one model together share: the result
// group their workers report into (data-parallel's workers, IST's), merged
// into one result of the job. actors/config/names.cpp reserves the name.

#include <string>

namespace baton::actors {
inline namespace modes {

/// The result group every worker reports into.
inline const std::string workers_group = "workers";

} // namespace modes
} // namespace baton::actors
