#pragma once

// Checked readers of YAML values that know where each value came from, for
// the topology parser (actors/config/topology.cpp). Internal to actors/: nothing
// thrown here may leave the parser, which turns a config_error into a
// bad_config value.

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "actors/config/names.hpp"

namespace baton::actors {
inline namespace config {
struct job_schema;

/// "did you mean 'epochs'?" for the one of `known` closest to `typed` (a
/// mistyped key or flag), or "" when none is close: at most one edit
/// (insert, delete, replace or swap two neighbours, ignoring case) per three
/// characters, at least one allowed. Shared by the unknown-key errors and
/// the command line (apps/args.hpp).
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known);
} // namespace config
} // namespace baton::actors

namespace baton::actors {
inline namespace config {
namespace detail {

// -- errors -------------------------------------------------------------------

/// A validation failure, already formatted "where: what".
///
/// It only unwinds the section parsers of the topology parser, so that each
/// check stays one line instead of an error-return ladder; the parser turns
/// it into a bad_config value and nothing thrown with it leaves the parser.
class config_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws a config_error "where: what".
[[noreturn]] void fail_at(const std::string& where, const std::string& what);

/// "a, b, c".
std::string join(const std::vector<std::string>& items);

/// Whether `x` is one of `items`.
bool contains(const std::vector<std::string>& items, const std::string& x);

/// The dotted path of `key` under `parent` ("" is the top level).
std::string child_path(const std::string& parent, const std::string& key);

/// How much of a value an error message quotes: a 50 MB value must not make
/// a 50 MB log line.
inline constexpr size_t max_quoted_bytes = 48;

/// `text` as errors show what a user typed: at most its first `most` bytes
/// (cut at a UTF-8 character boundary, then "... (N bytes)"), control
/// characters as \xNN so that a value cannot forge log lines.
std::string shortened(const std::string& text, size_t most);

/// shortened(text, max_quoted_bytes) in single quotes, as errors show a
/// value: "'abc'", or "'abc...' (52428800 bytes)".
std::string quoted(const std::string& text);

// -- limits ----------------------------------------------------------------------

/// The most entries a list may have when its reader sets no tighter limit,
/// so that no reader holds more than this many fields whatever the file says.
inline constexpr size_t max_list_items = 1024;

/// The longest string value: 4096 bytes, Linux's PATH_MAX (paths are the
/// longest strings a topology has).
inline constexpr size_t max_string_bytes = 4096;

// The longest name: config::max_name_bytes (actors/config/names.hpp).

// -- config files ---------------------------------------------------------------

/// The largest config file baton reads (a topology, a node.yaml): 256 KiB.
/// A real topology is a few KB; yaml-cpp holds ~750 bytes per value it
/// parses, so this cap bounds what a hostile file costs (~100 MB) before any
/// checked reader sees it.
inline constexpr size_t max_config_bytes = size_t{256} << 10;

/// Reads the whole config file `path` into `out`, at most max_config_bytes
/// (model::read_bounded_file, which says what "" or the words returned mean).
std::string read_config_file(const std::string& path, std::string& out);

// -- located values -------------------------------------------------------------

/// What every field needs to say where it came from: the file, and which paths
/// `--set` replaced (an error in those names the override, not a line).
struct source_info {
  std::string file;                             ///< as error messages name it
  std::filesystem::path base_dir;               ///< the file's directory; empty = cwd
  std::map<std::string, std::string> overrides; ///< path -> "--set path=value"
  /// The training modes' schemas (actors/config/job_schema.hpp): their keys
  /// are known keys. Outlives the fields.
  const std::vector<job_schema>* jobs = nullptr;
  /// How errors name the whole document.
  std::string document = "the topology";
};

/// A YAML value with its dotted path and origin; the checked readers below
/// take one and fail with "file:line: 'path' must be ..., got ...".
///
/// A field refers to its source_info, which must outlive it.
class field {
public:
  /// `line` is 0-based, as yaml-cpp counts; `origin` is the `--set` that put
  /// the value there, or empty.
  field(const source_info& source, YAML::Node node, std::string path, int line,
        std::string origin);

  /// A copy refers to the same node of the document.
  field(const field&) = default;

  /// Rebinds to `other`'s node. YAML::Node's operator= writes through to the
  /// node it refers to (it would edit the document); a field must rebind.
  field& operator=(const field& other);

  /// The whole document `doc`, with the empty path.
  static field root(const source_info& source, const YAML::Node& doc);

  /// The YAML value.
  const YAML::Node& node() const { return node_; }

  /// The dotted path, "" for the root ("heads.0.name").
  const std::string& path() const { return path_; }

  /// The file and overrides the value came from.
  const source_info& source() const { return *source_; }

  /// Whether there is no value (absent or `~`).
  bool is_null() const { return !node_.IsDefined() || node_.IsNull(); }

  /// Whether a `--set` put the value there.
  bool overridden() const { return !origin_.empty(); }

  /// "file:12" (1-based), or the `--set` that put the value there.
  std::string where() const;

  /// How errors name this value: "'path'", or source().document for the root.
  std::string name() const;

  /// The value as an error message shows it: "'text'", "a map", "a list" or
  /// "nothing".
  std::string shown() const;

  /// Throws a config_error "where(): what".
  [[noreturn]] void fail(const std::string& what) const;

  /// Throws a config_error "where(): name() must be `what`, got shown()".
  [[noreturn]] void expected(const std::string& what) const;

  /// The field under the key `at` of this map, holding `value`: a value is
  /// reported on its key's line (yaml-cpp marks an empty value on the next).
  field child(const YAML::Node& at, const YAML::Node& value) const;

  /// The value of `key`, if this is a map that has it.
  std::optional<field> get(const std::string& key) const;

  /// The value of `key`; fails if this has none.
  field require(const std::string& key) const;

  /// The value of `key`, or an empty value on this field's line: an absent
  /// section reads as one with no keys (all defaults).
  field section(const std::string& key) const;

  /// The entries of a list (none when empty); anything else fails with
  /// `what`, and so does a list of more than `most` entries (before any
  /// entry is read), naming the limit.
  std::vector<field> items(const std::string& what, size_t most = max_list_items) const;

private:
  // The override of `path` itself, else whichever covers this field.
  std::string origin_of(const std::string& path) const;

  const source_info* source_;
  YAML::Node node_;
  std::string path_;
  int line_; ///< 0-based, as yaml-cpp counts
  std::string origin_;
};

// -- checked readers ------------------------------------------------------------

/// The text of a scalar; anything else fails with `what`.
const std::string& scalar(const field& f, const std::string& what);

/// An integer in [min, max]; anything else fails with `what`.
///
/// Integers are read with from_chars: whole text, decimal, no silent rounding
/// of "4.5" or wrapping of out-of-range values.
template <class Integer>
Integer read_integer(const field& f, Integer min, Integer max, const std::string& what) {
  const std::string& text = scalar(f, what);
  Integer value = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (ec != std::errc{} || end != last || value < min || value > max)
    f.expected(what);
  return value;
}

/// An integer from 1 to INT32_MAX.
int32_t positive_int32(const field& f);

/// An integer from 1 to INT64_MAX.
int64_t positive_int64(const field& f);

/// An integer from 0 to INT64_MAX.
int64_t non_negative_int64(const field& f);

/// A finite number for which `ok(value)` holds; anything else fails with
/// `what`. Read with from_chars, like read_integer.
template <class Predicate>
double read_number(const field& f, const std::string& what, Predicate ok) {
  const std::string& text = scalar(f, what);
  double value = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (ec != std::errc{} || end != last || !std::isfinite(value) || !ok(value))
    f.expected(what);
  return value;
}

/// A non-empty string of at most max_string_bytes.
std::string read_string(const field& f);

/// A name under the one rule of actors/config/names.hpp (check_name): one
/// that refers to a task, head, node or actor, or is given to one.
std::string read_name(const field& f);

/// A name a user gives to a task, head or node: read_name, and none that
/// baton gives its own actors and node reports (reserved_name) or its own
/// files in a checkpoint directory (reserved_file_name).
/// `what` names the kind of thing in errors ("head").
std::string read_new_name(const field& f, const std::string& what);

/// One of `choices`.
std::string read_choice(const field& f, const std::vector<std::string>& choices);

/// Reads `key` of `section` into `out` when present; absent keys keep defaults.
template <class T, class Reader>
void read_if(const field& section, const std::string& key, T& out, Reader read) {
  if (auto f = section.get(key))
    out = read(*f);
}

/// A positive number of milliseconds (at most INT32_MAX).
std::chrono::milliseconds positive_milliseconds(const field& f);

/// A file path, made absolute and normalized.
///
/// Relative paths in a topology are relative to the file, not to the working
/// directory of whoever runs it, except in a `--set`: those were typed in the
/// working directory. Made absolute so that node processes started elsewhere
/// on the host find the same file.
std::string read_path(const field& f);

/// Names that must be unique within one list (tasks, heads, nodes), compared
/// as name_key does (ignoring case).
class unique_names {
public:
  /// `what` names the kind of thing in errors ("head").
  explicit unique_names(std::string what) : what_(std::move(what)) {}

  /// Records `name`, read from `f`; fails if it, or the same name in another
  /// case, was seen before.
  void add(const field& f, const std::string& name);

private:
  struct seen {
    std::string name;  ///< as first written
    std::string where; ///< where it was
  };
  std::string what_;
  std::map<std::string, seen> first_seen_; ///< name_key(name) -> first use
};

} // namespace detail
} // namespace config
} // namespace baton::actors
