// `--set path=value`: walks the document as the schema allows (creating
// sections the file lacks, appending to lists), replaces a key's older
// spelling, and remembers which override set each path so that errors in
// its value name it.

#include <algorithm>
#include <sstream>

#include "actors/config/topology_parts.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

namespace {

// The node under `parent` for one path segment of a `--set`, created when
// absent (so an override can add a key the file does not have). Only keys of
// the schema and indexes of its lists are accepted; index == size appends.
YAML::Node step_into(YAML::Node parent, const std::string& parent_path,
                     const std::string& segment, const std::string& where,
                     const source_info& source) {
  bool empty = !parent.IsDefined() || parent.IsNull();
  std::string pattern = pattern_of(parent_path);
  if (is_list(pattern, source)) {
    // "+" appends: `--set faults.+={kind: throw, ...}` adds an entry.
    std::optional<size_t> index =
      segment == "+" ? std::optional<size_t>{empty ? 0 : parent.size()} : parse_index(segment);
    if (!index)
      fail_at(where, quoted(segment) + " is not an index of the list '" + parent_path + "'");
    if (!empty && !parent.IsSequence())
      fail_at(where, "'" + parent_path + "' is not a list in the topology");
    if (*index > parent.size())
      fail_at(where, "index " + segment + " is past the end of '" + parent_path + "' ("
              + std::to_string(parent.size()) + " entries)");
    if (*index == parent.size())
      parent.push_back(YAML::Node(YAML::NodeType::Null));
    return parent[*index];
  }
  auto keys = keys_of(pattern, source);
  if (!keys)
    fail_at(where, "unknown key " + quoted(segment) + " in '" + parent_path
            + "' (it is a value, not a section)");
  if (!contains(*keys, segment))
    fail_at(where, "unknown key " + quoted(segment) + " " + in_section(parent_path)
            + " (expected one of: " + join(*keys) + ")" + hint(did_you_mean(segment, *keys)));
  if (!empty && !parent.IsMap())
    fail_at(where, "'" + parent_path + "' is not a map in the topology");
  return parent[segment];
}

YAML::Node parse_value(const std::string& text, const std::string& where) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail_at(where, "the value is not valid YAML: " + e.msg);
  }
}

// The node at `path` (dotted), walked and created as the schema allows.
// Sections created on the way have no line of their own: they remember the
// override that made them.
YAML::Node walk_to(YAML::Node& doc, const std::string& path, const std::string& origin,
                   source_info& source) {
  YAML::Node current;
  current.reset(doc);
  std::string at, segment;
  std::istringstream segments(path);
  while (std::getline(segments, segment, '.')) {
    YAML::Node next = step_into(current, at, segment, "--set " + path, source);
    if (segment == "+") // the entry it appended
      segment = std::to_string(current.size() - 1);
    at = child_path(at, segment);
    if (next.Mark().is_null())
      source.overrides.emplace(at, origin);
    current.reset(next);
  }
  return current;
}

// Keys that have an older name a file may still use: the parser reads either
// and refuses both. A `--set` of one spelling replaces the other from the
// file, as a `--set` replaces the value it names (issue 32 item 23: shipped
// configs spelt data.dataset, so `--set data.kind=cifar10` was refused).
struct renamed_key {
  const char* current;
  const char* older;
};
constexpr renamed_key renamed_keys[] = {
  {"data.kind", "data.dataset"},
  {"runtime.compute_threads", "runtime.stage_threads"},
  {"target_accuracy", "runtime.stop_at_accuracy"},
};

// Removes the value at dotted `path` from `doc` if it is there (never
// creating a node on the way), and what overrides set below it.
void remove_path(YAML::Node& doc, const std::string& path, source_info& source) {
  YAML::Node parent;
  parent.reset(doc);
  std::string segment, last;
  std::istringstream segments(path);
  std::getline(segments, last, '.');
  while (std::getline(segments, segment, '.')) {
    if (!parent.IsMap() || !static_cast<const YAML::Node&>(parent)[last])
      return;
    YAML::Node next = static_cast<const YAML::Node&>(parent)[last];
    parent.reset(next);
    last = segment;
  }
  if (parent.IsMap() && static_cast<const YAML::Node&>(parent)[last])
    parent.remove(last);
  for (auto it = source.overrides.lower_bound(path);
       it != source.overrides.end()
       && (it->first == path || it->first.compare(0, path.size() + 1, path + ".") == 0);)
    it = source.overrides.erase(it);
}

// The other spelling of `path` (see renamed_keys) is gone from `doc`.
void remove_other_spelling(YAML::Node& doc, const std::string& path, source_info& source) {
  for (const renamed_key& key : renamed_keys) {
    if (path == key.current)
      remove_path(doc, key.older, source);
    else if (path == key.older)
      remove_path(doc, key.current, source);
  }
}

// How errors name the override `text`: "--set a.b=value", cut short as
// values are, since every error in it repeats this.
std::string override_origin(const std::string& text) {
  return "--set " + shortened(text, 128);
}

} // namespace

void detail::apply_override(YAML::Node& doc, const std::string& text, source_info& source) {
  const std::string origin = override_origin(text);
  constexpr size_t longest_path = 256; // the schema's longest is ~40
  size_t equals = text.find('=');
  std::string path = text.substr(0, std::min(equals, longest_path + 1));
  if (equals == std::string::npos || path.empty() || path.front() == '.'
      || path.back() == '.' || path.find("..") != std::string::npos)
    fail_at(origin, "expected dotted.key=value (for example data.epochs=3)");
  if (path.size() > longest_path)
    fail_at(origin, "the key is longer than " + std::to_string(longest_path)
                      + " bytes (expected dotted.key=value, for example data.epochs=3)");
  YAML::Node value = parse_value(text.substr(equals + 1), origin);
  remove_other_spelling(doc, path, source);
  YAML::Node target = walk_to(doc, path, origin, source);
  target = value; // yaml-cpp's assignment writes through into the document
  // Paths below `path` that earlier overrides set are gone with their values.
  const std::string below = path + ".";
  auto it = source.overrides.lower_bound(below);
  while (it != source.overrides.end() && it->first.compare(0, below.size(), below) == 0)
    it = source.overrides.erase(it);
  source.overrides[path] = origin;
}

} // namespace config
} // namespace baton::actors
