#include "actors/yaml_field.hpp"

#include <algorithm>
#include <limits>

namespace baton::actors::detail {

namespace fs = std::filesystem;

// -- errors -------------------------------------------------------------------

void fail_at(const std::string& where, const std::string& what) {
  throw config_error(where + ": " + what);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool contains(const std::vector<std::string>& items, const std::string& x) {
  return std::find(items.begin(), items.end(), x) != items.end();
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// -- located values -------------------------------------------------------------

field::field(const source_info& source, YAML::Node node, std::string path, int line,
             std::string origin)
  : source_(&source), node_(std::move(node)), path_(std::move(path)), line_(line),
    origin_(std::move(origin)) {}

field& field::operator=(const field& other) {
  source_ = other.source_;
  node_.reset(other.node_);
  path_ = other.path_;
  line_ = other.line_;
  origin_ = other.origin_;
  return *this;
}

field field::root(const source_info& source, const YAML::Node& doc) {
  return field(source, doc, "", doc.Mark().line, "");
}

std::string field::where() const {
  if (!origin_.empty())
    return origin_;
  return source_->file + ":" + std::to_string(std::max(line_, 0) + 1);
}

std::string field::name() const {
  return path_.empty() ? "the topology" : "'" + path_ + "'";
}

std::string field::shown() const {
  if (node_.IsScalar())
    return "'" + node_.Scalar() + "'";
  if (node_.IsMap())
    return "a map";
  return node_.IsSequence() ? "a list" : "nothing";
}

void field::fail(const std::string& what) const {
  fail_at(where(), what);
}

void field::expected(const std::string& what) const {
  fail(name() + " must be " + what + ", got " + shown());
}

field field::child(const YAML::Node& at, const YAML::Node& value) const {
  std::string path = child_path(path_, at.Scalar());
  return field(*source_, value, path, at.Mark().line, origin_of(path));
}

std::optional<field> field::get(const std::string& key) const {
  if (node_.IsMap())
    for (const auto& entry : node_)
      if (entry.first.Scalar() == key)
        return child(entry.first, entry.second);
  return std::nullopt;
}

field field::require(const std::string& key) const {
  if (auto f = get(key))
    return *f;
  fail(name() + " is missing the key '" + key + "'");
}

field field::section(const std::string& key) const {
  if (auto f = get(key))
    return *f;
  std::string path = child_path(path_, key);
  return field(*source_, YAML::Node(YAML::NodeType::Null), path, line_, origin_of(path));
}

std::vector<field> field::items(const std::string& what) const {
  if (is_null())
    return {};
  if (!node_.IsSequence())
    expected(what);
  std::vector<field> out;
  for (const auto& item : node_) {
    std::string path = child_path(path_, std::to_string(out.size()));
    out.emplace_back(*source_, item, path, item.Mark().line, origin_of(path));
  }
  return out;
}

std::string field::origin_of(const std::string& path) const {
  auto it = source_->overrides.find(path);
  return it != source_->overrides.end() ? it->second : origin_;
}

// -- checked readers ------------------------------------------------------------

const std::string& scalar(const field& f, const std::string& what) {
  if (!f.node().IsScalar())
    f.expected(what);
  return f.node().Scalar();
}

int32_t positive_int32(const field& f) {
  return read_integer<int32_t>(f, 1, std::numeric_limits<int32_t>::max(), "a positive integer");
}

int64_t positive_int64(const field& f) {
  return read_integer<int64_t>(f, 1, std::numeric_limits<int64_t>::max(), "a positive integer");
}

int64_t non_negative_int64(const field& f) {
  return read_integer<int64_t>(f, 0, std::numeric_limits<int64_t>::max(),
                               "a non-negative integer");
}

std::string read_string(const field& f) {
  const std::string& text = scalar(f, "a non-empty string");
  if (text.empty())
    f.expected("a non-empty string");
  return text;
}

std::string read_choice(const field& f, const std::vector<std::string>& choices) {
  const std::string& text = scalar(f, "one of: " + join(choices));
  if (!contains(choices, text))
    f.expected("one of: " + join(choices));
  return text;
}

std::chrono::milliseconds positive_milliseconds(const field& f) {
  return std::chrono::milliseconds{positive_int32(f)};
}

std::string read_path(const field& f) {
  fs::path path = read_string(f);
  if (path.is_relative() && !f.overridden())
    path = f.source().base_dir / path;
  return fs::absolute(path).lexically_normal().string();
}

void unique_names::add(const field& f, const std::string& name) {
  auto [it, fresh] = first_seen_.emplace(name, f.where());
  if (!fresh)
    f.fail(what_ + " '" + name + "' is defined twice (first at " + it->second + ")");
}

} // namespace baton::actors::detail
