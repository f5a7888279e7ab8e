#include "actors/config/yaml_codec.hpp"

#include <algorithm>
#include <exception>
#include <set>

#include "messages/errc.hpp"

namespace baton::actors {
inline namespace config {

namespace detail {

std::string read_text(const field& f) {
  static const std::string what =
    "a string of at most " + std::to_string(max_string_bytes) + " bytes";
  const std::string& text = scalar(f, what);
  if (text.size() > max_string_bytes)
    f.expected(what);
  return text;
}

bool read_bool(const field& f) {
  bool value = false;
  if (!f.node().IsScalar() || !YAML::convert<bool>::decode(f.node(), value))
    f.expected("true or false");
  return value;
}

} // namespace detail

std::string dump(const YAML::Node& n) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << n;
  return out.c_str();
}

// -- yaml_reader ----------------------------------------------------------------

yaml_reader::yaml_reader(detail::field map) : map_(std::move(map)) {
  if (!map_.node().IsMap())
    map_.expected("a map");
}

std::optional<detail::field> yaml_reader::take(const std::string& key, bool required) {
  taken_.push_back(key);
  if (required)
    return map_.require(key);
  return map_.get(key);
}

void yaml_reader::guarded(const detail::field& f, const std::function<void()>& apply) {
  try {
    apply();
  } catch (const detail::config_error&) {
    throw;
  } catch (const std::exception& e) {
    f.fail(f.name() + " is refused: " + e.what());
  }
}

void yaml_reader::expect(const std::string& path, bool ok, const std::string& what) const {
  if (ok)
    return;
  std::optional<detail::field> at = map_;
  for (size_t begin = 0; at && begin <= path.size();) {
    size_t end = std::min(path.find('.', begin), path.size());
    at = at->get(path.substr(begin, end - begin));
    begin = end + 1;
  }
  if (!at)
    map_.fail("'" + detail::child_path(map_.path(), path) + "' must be " + what);
  at->expected(what);
}

void yaml_reader::finish() const {
  std::set<std::string> seen;
  for (const auto& entry : map_.node()) {
    const auto f = map_.child(entry.first, entry.second);
    const std::string& key = entry.first.Scalar();
    if (!seen.insert(key).second)
      f.fail(f.name() + " is given twice");
    if (!detail::contains(taken_, key))
      f.fail(f.name() + " is not a known key (expected one of: " + detail::join(taken_) + ")");
  }
}

// -- documents ------------------------------------------------------------------

caf::error read_document(const std::string& text, const std::string& what,
                         const std::function<void(const detail::field&)>& read) {
  detail::source_info source;
  source.file = what + " spec";
  source.document = "the " + what + " spec";
  try {
    read(detail::field::root(source, YAML::Load(text)));
    return {};
  } catch (const detail::config_error& e) {
    return make_error(errc::bad_config, std::string{"unreadable "} + e.what());
  } catch (const std::exception& e) {
    return make_error(errc::bad_config, "unreadable " + what + " spec: " + e.what());
  }
}

} // namespace config
} // namespace baton::actors
