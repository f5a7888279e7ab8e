// The key schema: which keys each section has, by path pattern, taken from
// the sections' field lists. The validation (check_section) and `--set`
// (overrides.cpp) both read this one table, so they cannot disagree about
// what a known key is.

#include <charconv>
#include <sstream>

#include "actors/config/topology_parts.hpp"

namespace baton::actors {
inline namespace config {

using namespace detail;

// -- schema -------------------------------------------------------------------

// The keys of each map section by path pattern ("*" stands for a list
// index): the top level's, and each common section's from its field list
// (actors/config/section_fields.hpp). The validation and `--set` both read
// this one table, so they cannot disagree about what a known key is.
const std::map<std::string, std::vector<std::string>>& detail::section_keys() {
  static const std::map<std::string, std::vector<std::string>> keys = [] {
    std::map<std::string, std::vector<std::string>> out = {
      {"", {"job", "seed", "data", "backbone", "tasks", "task", "target_accuracy", "save",
            "early_stopping", "runtime", "nodes", "faults", "optimizer"}},
      {"optimizer", optimizer_keys()},
      {"backbone.pretrain.optimizer", optimizer_keys()},
    };
    out.merge(data_section_keys());
    out.merge(workload_section_keys());
    out.merge(cluster_section_keys());
    return out;
  }();
  return keys;
}

namespace {

// The jobs `source` is parsed with.
const std::vector<job_schema>& jobs_of(const source_info& source) {
  static const std::vector<job_schema> none;
  return source.jobs != nullptr ? *source.jobs : none;
}

// Appends the keys of `more` that `keys` does not have yet.
void add_keys(std::optional<std::vector<std::string>>& keys, const std::vector<std::string>& more) {
  if (!keys)
    keys.emplace();
  for (const auto& key : more)
    if (!contains(*keys, key))
      keys->push_back(key);
}

} // namespace

// The keys of the map at `pattern`: the common sections' and every job's
// (each job's own section is a key of the top level; a job's keys at a
// common path add to the common ones); nullopt for a path that is not a
// map of the schema. Which job may use a key is checked once `job:` is
// known (refuse_other_jobs).
std::optional<std::vector<std::string>> detail::keys_of(const std::string& pattern,
                                                        const source_info& source) {
  std::optional<std::vector<std::string>> keys;
  if (auto common = section_keys().find(pattern); common != section_keys().end())
    keys = common->second;
  for (const job_schema& job : jobs_of(source)) {
    if (pattern.empty() && !job.section.empty())
      add_keys(keys, {job.section});
    if (auto own = job.keys.find(pattern); own != job.keys.end())
      add_keys(keys, own->second);
  }
  return keys;
}

// Paths whose value is a list; `--set` addresses their entries by index.
bool detail::is_list(const std::string& pattern, const source_info& source) {
  static const std::vector<std::string> lists = {"tasks", "nodes", "tasks.*.labels", "faults"};
  if (contains(lists, pattern))
    return true;
  for (const job_schema& job : jobs_of(source))
    if (contains(job.lists, pattern))
      return true;
  return false;
}

std::optional<size_t> detail::parse_index(const std::string& text) {
  size_t value = 0;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (text.empty() || ec != std::errc{} || end != last)
    return std::nullopt;
  return value;
}

// "tasks.2.labels" -> "tasks.*.labels": the schema entry of a path.
std::string detail::pattern_of(const std::string& path) {
  std::string out, segment;
  std::istringstream in(path);
  while (std::getline(in, segment, '.'))
    out = child_path(out, parse_index(segment) ? "*" : segment);
  return out;
}

// "at the top level" / "in 'runtime'", for key errors.
std::string detail::in_section(const std::string& path) {
  return path.empty() ? "at the top level" : "in '" + path + "'";
}

// "; did you mean 'epochs'?" after a key error (did_you_mean), or "".
std::string detail::hint(const std::string& suggestion) {
  return suggestion.empty() ? suggestion : "; " + suggestion;
}

void detail::check_section(const field& f) {
  if (f.is_null())
    return;
  if (!f.node().IsMap())
    f.expected("a map");
  const auto allowed = keys_of(pattern_of(f.path()), f.source()).value();
  std::vector<std::string> seen;
  for (const auto& entry : f.node()) {
    const std::string& key = entry.first.Scalar();
    field at = f.child(entry.first, entry.first);
    if (!contains(allowed, key))
      at.fail("unknown key " + quoted(key) + " " + in_section(f.path()) + " (expected one of: "
              + join(allowed) + ")" + hint(did_you_mean(key, allowed)));
    if (contains(seen, key))
      at.fail("key " + quoted(key) + " appears twice " + in_section(f.path()));
    seen.push_back(key);
  }
}

} // namespace config
} // namespace baton::actors
