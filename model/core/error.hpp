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

/// An error of a file model/ reads or writes (a dataset, a checkpoint that is
/// missing, corrupt or does not match the model, a TorchScript archive, a
/// checkpoint that cannot be written): bad input of the run, where other
/// model errors are failures of the computation or of its caller.
class file_error : public error {
public:
  using error::error;
};

} // namespace baton::model
