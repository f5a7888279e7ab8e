#pragma once

// The one mapping from an exception caught at an actor's boundary (a role's
// factory, a handler run by `guarded`) to an error value (STYLE "Errors").

#include <exception>
#include <string>

#include <caf/error.hpp>

namespace baton::actors {
inline namespace flow {

/// The error value of `e`, caught where an actor meets LibTorch and model/:
/// - model::file_error (a dataset, checkpoint or TorchScript file that is
///   missing, corrupt or does not match the model) -> errc::bad_file;
/// - c10::Error (LibTorch refused a computation) -> errc::compute_failed,
///   its message without LibTorch's C++ backtrace;
/// - anything else (other model errors, a protocol violation) ->
///   errc::actor_failed.
/// The context is "`doing`: what e says", or what e says when `doing` is "".
caf::error error_of(const std::exception& e, const std::string& doing = "");

} // namespace flow
} // namespace baton::actors
