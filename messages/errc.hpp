#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>

namespace baton {

/// Expected failures of baton, carried as `caf::error` values
/// (`caf::expected<T>`). One line per value says when it is used.
enum class errc : uint8_t {
  /// Not an error (CAF reserves 0).
  none = 0,
  /// A tensor's shape, dtype and byte length do not agree.
  shape_mismatch,
  /// A dtype code that this build does not know.
  unknown_dtype,
  /// A message written with a schema version this build cannot read.
  unknown_schema_version,
  /// A message or tensor larger than the configured limit (64 MiB default).
  payload_too_large,
  /// Bytes that are not a valid Cap'n Proto message of the expected kind.
  malformed_message,
  /// A configuration or topology file that is missing, unreadable or wrong.
  bad_config,
  /// A node was asked to spawn an actor type it has not registered.
  unknown_actor_type,
  /// A node could not be reached or stopped answering.
  node_unreachable,
  /// A file (dataset, checkpoint, model) is missing or unreadable.
  bad_file,
  /// LibTorch raised an error inside a compute actor.
  compute_failed,
  /// An actor of the job terminated before the job ended.
  actor_failed,
  /// The user interrupted the run (Ctrl-C / SIGTERM).
  interrupted,
};

/// Name of `x` as written in the enum, for logs and error messages.
std::string to_string(errc x);

/// Builds an error value of category `errc` with a human-readable context.
caf::error make_error(errc code, std::string context);

/// The context of `err` as text: the string make_error stored, "" for none.
std::string context_of(const caf::error& err);

/// A one-line description for logs and users: "name: context" for errors of
/// baton (e.g. "payload_too_large: tensor of 80 MiB exceeds the 64 MiB limit")
/// and of CAF's `sec`, CAF's to_string(err) for others, "none" for no error.
std::string describe(const caf::error& err);

} // namespace baton

// CAF 0.17.6 has no `caf::error_category` trait (that is CAF 0.18+): an error
// category is an atom. This makes `caf::error e = errc::x;`,
// `caf::make_error(errc::x, context...)` and `e == errc::x` work; errors of
// baton have `e.category() == error_category_atom`.
CAF_ERROR_CODE_ENUM(baton::errc, "baton")

namespace baton {

/// The CAF category of every baton error (`caf::error::category()`).
inline constexpr caf::atom_value error_category_atom = caf::atom("baton");

} // namespace baton
