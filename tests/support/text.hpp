#pragma once

// What tests read and search: a file's whole text, and whether a text holds
// a part (for the messages baton prints).

#include <string>

namespace baton::testing {

/// The bytes of the file at `path` as a string; "" when it is missing or
/// cannot be read.
std::string read_text(const std::string& path);

/// Whether `part` occurs in `text`.
bool contains(const std::string& text, const std::string& part);

} // namespace baton::testing
