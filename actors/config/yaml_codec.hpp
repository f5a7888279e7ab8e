#pragma once

// One field list per settings struct, serving both directions, as CAF's
// inspect(f, x): yaml_writer turns a struct into YAML text, yaml_reader reads
// that text back strictly (an unknown or repeated key, a missing required
// key, a value of the wrong type or out of range -> errc::bad_config naming
// the key's path and line; never a half-filled struct).
//
// A settings struct gets, in its own namespace (the codec finds it by ADL):
//
//   template <class Inspector>
//   void inspect(Inspector& f, worker_settings& x) {
//     f.field("model", x.model);                  // a struct with its own inspect
//     f.field("begin", x.begin).at_least(0);      // checks: at_least, at_most, above,
//     f.field("end", x.end);                      //   in, one_of, check(predicate, what)
//     f.expect("end", x.end > x.begin, "greater than begin"); // across fields
//     f.optional_field("hidden", x.hidden);       // absent: keeps the default
//     f.object("freeze", [&](auto& g) {           // a map of the struct's own fields
//       g.field("up_to", x.freeze_up_to);
//     });
//     f.optional_field("run", [&] { return run_settings{x.recovery, false}; }, // getter,
//                      [&](run_settings run) { x.recovery = run.recovery; });  // setter
//   }
//
// and its public codec is two lines:
//
//   std::string to_yaml(const worker_settings& x) { return write_yaml(x); }
//   caf::expected<worker_settings> parse_worker_settings(const std::string& yaml) {
//     return read_yaml<worker_settings>(yaml, "worker"); // "unreadable worker spec:3: ..."
//   }
//
// Fields are written in the order listed. Values: bool, integers, floating
// point, std::string, std::vector of any of these or of structs, and structs
// with an inspect. The writer never modifies `x`; checks are no-ops in it.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/expected.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace config {

namespace detail {

template <class T>
struct is_vector : std::false_type {};

template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

/// `x` as a check's message shows a bound: "0", "2.5", "-1".
template <class T>
std::string shown_bound(const T& x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

/// The text of a scalar: a string of at most max_string_bytes, "" allowed.
std::string read_text(const field& f);

/// true or false (and the other spellings YAML 1.1 gives them).
bool read_bool(const field& f);

/// What an error says an integer of type T must be.
template <class T>
std::string integer_what() {
  return "an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
         std::to_string(std::numeric_limits<T>::max());
}

} // namespace detail

/// The checks that may follow a field: `f.field("begin", x.begin).at_least(0)`.
/// Each fails naming the field, its line and its value. In the writer, and
/// for an absent optional field, they check nothing.
template <class T>
class value_check {
public:
  /// `where` is the field read into `value`, or nothing to check.
  value_check(std::optional<detail::field> where, const T& value)
    : where_(std::move(where)), value_(value) {}

  /// Fails unless value >= min.
  value_check& at_least(const T& min) {
    return check([&](const T& v) { return v >= min; }, "at least " + detail::shown_bound(min));
  }

  /// Fails unless value <= max.
  value_check& at_most(const T& max) {
    return check([&](const T& v) { return v <= max; }, "at most " + detail::shown_bound(max));
  }

  /// Fails unless value > min.
  value_check& above(const T& min) {
    return check([&](const T& v) { return v > min; },
                 "greater than " + detail::shown_bound(min));
  }

  /// Fails unless min <= value <= max.
  value_check& in(const T& min, const T& max) {
    return check([&](const T& v) { return min <= v && v <= max; },
                 "from " + detail::shown_bound(min) + " to " + detail::shown_bound(max));
  }

  /// Fails unless the value is one of `choices` (strings).
  value_check& one_of(const std::vector<std::string>& choices) {
    return check([&](const T& v) { return detail::contains(choices, v); },
                 "one of: " + detail::join(choices));
  }

  /// Fails with "'path' must be `what`, got ..." unless ok(value).
  template <class Predicate>
  value_check& check(Predicate ok, const std::string& what) {
    if (where_ && !ok(value_))
      where_->expected(what);
    return *this;
  }

private:
  std::optional<detail::field> where_;
  const T& value_;
};

// -- writing --------------------------------------------------------------------

class yaml_writer;

/// `x` as a YAML node: a scalar, a sequence, or the map its inspect writes.
template <class T>
YAML::Node to_node(const T& x);

/// The inspector that writes a struct's fields into a YAML map.
class yaml_writer {
public:
  /// Writes into `map` (a YAML node refers to its document: no copy).
  explicit yaml_writer(YAML::Node map) : map_(std::move(map)) {}

  /// Writes `x` under `key`.
  template <class T>
  value_check<T> field(const std::string& key, T& x) {
    map_[key] = to_node(x);
    return {std::nullopt, x};
  }

  /// Written as field() is: the reader tells them apart.
  template <class T>
  value_check<T> optional_field(const std::string& key, T& x) {
    return field(key, x);
  }

  /// Writes get() under `key`; `set` is the reader's.
  template <class Get, class Set>
  void field(const std::string& key, Get get, Set) {
    map_[key] = to_node(get());
  }

  /// Written as field(key, get, set) is.
  template <class Get, class Set>
  void optional_field(const std::string& key, Get get, Set set) {
    field(key, std::move(get), std::move(set));
  }

  /// The map `key` with the fields fill(inspector) lists.
  template <class Fill>
  void object(const std::string& key, Fill fill) {
    YAML::Node child(YAML::NodeType::Map);
    yaml_writer sub{child};
    fill(sub);
    map_[key] = child;
  }

  /// Nothing to check in what is written.
  void expect(const std::string&, bool, const std::string&) const {}

private:
  YAML::Node map_;
};

template <class T>
YAML::Node to_node(const T& x) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    return YAML::Node(x);
  } else if constexpr (detail::is_vector<T>::value) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& item : x)
      out.push_back(to_node(item));
    // `[]` on the key's line, as yaml-cpp writes an empty list it has read:
    // the settings the plan writes and those a node re-writes are one text.
    if (x.empty())
      out.SetStyle(YAML::EmitterStyle::Flow);
    return out;
  } else {
    YAML::Node out(YAML::NodeType::Map);
    yaml_writer writer{out};
    inspect(writer, const_cast<T&>(x)); // the writer only reads
    return out;
  }
}

/// `n` as text, doubles with all 17 digits (a round trip keeps every bit).
std::string dump(const YAML::Node& n);

/// `x` as YAML text, its fields in the order its inspect lists them.
template <class T>
std::string write_yaml(const T& x) {
  return dump(to_node(x));
}

// -- reading --------------------------------------------------------------------

class yaml_reader;

/// Reads the value of `f` into `x`, strictly (see the top of this file).
/// Throws detail::config_error.
template <class T>
void read_value(const detail::field& f, T& x);

/// The inspector that reads a struct's fields from a YAML map, strictly.
/// Throws detail::config_error; read_yaml turns that into an error value.
class yaml_reader {
public:
  /// Reads the map `map`; fails unless it is one.
  explicit yaml_reader(detail::field map);

  /// Reads `key` (which must be there) into `x`.
  template <class T>
  value_check<T> field(const std::string& key, T& x) {
    auto f = take(key, true);
    read_value(*f, x);
    return {std::move(f), x};
  }

  /// Reads `key` into `x` if it is there; else `x` keeps its value.
  template <class T>
  value_check<T> optional_field(const std::string& key, T& x) {
    auto f = take(key, false);
    if (f)
      read_value(*f, x);
    return {std::move(f), x};
  }

  /// Reads `key` (which must be there) into a copy of get() and passes it to
  /// set; what set throws fails naming the key.
  template <class Get, class Set>
  void field(const std::string& key, Get get, Set set) {
    read_through(*take(key, true), get, set);
  }

  /// field(key, get, set) if `key` is there; else set is not called.
  template <class Get, class Set>
  void optional_field(const std::string& key, Get get, Set set) {
    if (auto f = take(key, false))
      read_through(*f, get, set);
  }

  /// Reads the map `key` (which must be there) with fill(inspector).
  template <class Fill>
  void object(const std::string& key, Fill fill) {
    yaml_reader sub{*take(key, true)};
    fill(sub);
    sub.finish();
  }

  /// Fails unless `ok`, naming the value at `path` (dotted, under this map):
  /// "'path' must be `what`, got ...".
  void expect(const std::string& path, bool ok, const std::string& what) const;

  /// Fails on a key no field took, or one given twice.
  void finish() const;

private:
  // The value of `key`, remembered as taken; fails if `required` and absent.
  std::optional<detail::field> take(const std::string& key, bool required);

  // Calls `apply`, turning what it throws (not a config_error) into a failure at `f`.
  static void guarded(const detail::field& f, const std::function<void()>& apply);

  template <class Get, class Set>
  static void read_through(const detail::field& f, Get& get, Set& set) {
    auto value = get();
    read_value(f, value);
    guarded(f, [&] { set(std::move(value)); });
  }

  detail::field map_;
  std::vector<std::string> taken_;
};

template <class T>
void read_value(const detail::field& f, T& x) {
  if constexpr (std::is_same_v<T, std::string>) {
    x = detail::read_text(f);
  } else if constexpr (std::is_same_v<T, bool>) {
    x = detail::read_bool(f);
  } else if constexpr (std::is_integral_v<T>) {
    x = detail::read_integer<T>(f, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                                detail::integer_what<T>());
  } else if constexpr (std::is_floating_point_v<T>) {
    x = static_cast<T>(detail::read_number(f, "a finite number", [](double) { return true; }));
  } else if constexpr (detail::is_vector<T>::value) {
    T items;
    for (const auto& item : f.items("a list"))
      read_value(item, items.emplace_back());
    x = std::move(items);
  } else {
    yaml_reader reader{f};
    inspect(reader, x);
    reader.finish();
  }
}

/// The struct T that the YAML node `n` describes, read strictly; throws
/// detail::config_error "<what>:<line>: 'path' must be ..., got ...".
template <class T>
T from_node(const YAML::Node& n, const std::string& what) {
  detail::source_info source;
  source.file = what;
  source.document = "the " + what;
  T x;
  read_value(detail::field::root(source, n), x);
  return x;
}

/// Reads the whole document `text` with read(root), any failure turned into
/// errc::bad_config "unreadable <what> spec:<line>: ...".
caf::error read_document(const std::string& text, const std::string& what,
                         const std::function<void(const detail::field&)>& read);

/// The struct T that `text` (write_yaml's output, or YAML like it) describes;
/// errc::bad_config "unreadable <what> spec:<line>: 'path' must be ..., got
/// ..." on anything else.
template <class T>
caf::expected<T> read_yaml(const std::string& text, const std::string& what) {
  T x;
  if (auto err = read_document(text, what, [&](const detail::field& root) { read_value(root, x); }))
    return err;
  return x;
}

} // namespace config
} // namespace baton::actors
