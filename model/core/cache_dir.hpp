#pragma once
// Where baton keeps what it measured or checked once per machine or file:
// predict's link and runtime calibrations (apps/predict) and the data files
// whose whole check passed (model/core/datasets/verified_files.hpp).

#include <cstdlib>
#include <string>

namespace baton::model {

/// $XDG_CACHE_HOME/baton, else $HOME/.cache/baton; empty when neither is set.
inline std::string user_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/baton";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/baton";
  return {};
}

} // namespace baton::model
