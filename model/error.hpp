#pragma once

#include <stdexcept>
#include <string>

namespace baton::model {

/// The only exception model/ throws on expected failures (missing or corrupt
/// file, unknown model name, shape mismatch on load). The message names the
/// file and what was expected. Actors catch it (and c10::Error) at their
/// boundary and turn it into an error value.
class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace baton::model
