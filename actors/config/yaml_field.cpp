#include "actors/config/yaml_field.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

#include "model/core/bounded_file.hpp"

namespace baton::actors {
inline namespace config {

namespace {

/// The optimal string alignment distance of `a` and `b` ignoring ASCII
/// case: edits (insert, delete, replace, swap of two neighbours) from one
/// to the other.
size_t edit_distance(const std::string& a, const std::string& b) {
  auto same = [](char x, char y) { return std::tolower(x) == std::tolower(y); };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const auto& name : known) {
    const size_t distance = edit_distance(typed, name);
    const size_t allowed = std::max<size_t>(1, std::max(typed.size(), name.size()) / 3);
    if (name == typed || distance > allowed || (best != nullptr && distance >= best_distance))
      continue;
    best = &name;
    best_distance = distance;
  }
  return best == nullptr ? std::string{} : "did you mean '" + *best + "'?";
}

namespace detail {

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

namespace {

// The first `most` bytes of `text` at most, cut at a UTF-8 character
// boundary (never after a lead byte), control characters as \xNN; `cut`
// says whether anything was left out.
std::string printable_prefix(const std::string& text, size_t most, bool& cut) {
  size_t end = std::min(text.size(), most);
  // Back off continuation bytes (10xxxxxx) to the start of their character.
  while (end < text.size() && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
    --end;
  cut = end < text.size();
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      static const char hex[] = "0123456789abcdef";
      out += std::string{"\\x"} + hex[c >> 4] + hex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

} // namespace

std::string shortened(const std::string& text, size_t most) {
  bool cut = false;
  std::string out = printable_prefix(text, most, cut);
  return cut ? out + "... (" + std::to_string(text.size()) + " bytes)" : out;
}

std::string quoted(const std::string& text) {
  bool cut = false;
  std::string out = "'" + printable_prefix(text, max_quoted_bytes, cut);
  return cut ? out + "...' (" + std::to_string(text.size()) + " bytes)" : out + "'";
}

// -- config files ---------------------------------------------------------------

std::string read_config_file(const std::string& path, std::string& out) {
  return model::read_bounded_file(path, out, max_config_bytes, "a config file");
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
  return path_.empty() ? source_->document : "'" + path_ + "'";
}

std::string field::shown() const {
  if (node_.IsScalar())
    return quoted(node_.Scalar());
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

std::vector<field> field::items(const std::string& what, size_t most) const {
  if (is_null())
    return {};
  if (!node_.IsSequence())
    expected(what);
  if (node_.size() > most)
    fail(name() + " has " + std::to_string(node_.size()) + " entries, more than the "
         + std::to_string(most) + " allowed (expected " + what + ", at most "
         + std::to_string(most) + ")");
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
  static const std::string what =
    "a non-empty string of at most " + std::to_string(max_string_bytes) + " bytes";
  const std::string& text = scalar(f, what);
  if (text.empty() || text.size() > max_string_bytes)
    f.expected(what);
  return text;
}

std::string read_name(const field& f) {
  const std::string& text = scalar(f, name_rule());
  if (std::string why = check_name(text); !why.empty())
    f.fail(f.name() + " must be " + name_rule() + ", got " + f.shown() + " (" + why + ")");
  return text;
}

std::string read_new_name(const field& f, const std::string& what) {
  std::string name = read_name(f);
  if (reserved_name(name))
    f.fail(what + " '" + name + "' has the name of one of baton's own actors or nodes ("
           + reserved_names() + ", in any case): the two would share their messages and "
           + "checkpoints (expected another name)");
  if (reserved_file_name(name))
    f.fail(what + " '" + name + "' has the name of a file of the checkpoint directory ("
           + reserved_file_names() + ", in any case), where the checkpoints of an actor of "
           + "that name would have their directory (expected another name)");
  return name;
}

std::string read_choice(const field& f, const std::vector<std::string>& choices) {
  const std::string& text = scalar(f, "one of: " + join(choices));
  if (!contains(choices, text)) {
    const std::string hint = did_you_mean(text, choices);
    f.fail(f.name() + " must be one of: " + join(choices) + ", got " + f.shown() +
           (hint.empty() ? "" : "; " + hint));
  }
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
  auto [it, fresh] = first_seen_.emplace(name_key(name), seen{name, f.where()});
  if (fresh)
    return;
  if (it->second.name == name)
    f.fail(what_ + " '" + name + "' is defined twice (first at " + it->second.where + ")");
  f.fail(what_ + " '" + name + "' is " + what_ + " '" + it->second.name + "' (at "
         + it->second.where + ") in another case, and names that differ only in case count as "
         + "the same (on a case-insensitive file system they are one directory)");
}

} // namespace detail
} // namespace config
} // namespace baton::actors
