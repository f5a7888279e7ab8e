#pragma once

// A line logged once per process: what every actor of a process computes
// alike (a worker's data, a model's shape) is said once, not per actor.

#include <string>

namespace baton::model {

/// Logs `text` at info level unless this process logged the same text before.
void log_once(const std::string& text);

} // namespace baton::model
