#pragma once

// A common section's field list: each key of the section once, in the order
// it is read, with how its value is read. The key schema (section_keys,
// topology_schema.cpp) takes the section's keys from its list, so the
// validation, `--set` and the reader cannot disagree about a key, and no
// key is written twice. Internal to actors/config.
//
//   const section_fields<runtime_spec>& runtime_fields() {
//     static const section_fields<runtime_spec> fields{
//       {"window", [](const field& f, const field&, runtime_spec& r) { r.window = ...; }},
//       {"tls", ...}};
//     return fields;
//   }
//   runtime_fields().read(root.section("runtime"), t.runtime);

#include <initializer_list>
#include <string>
#include <vector>

#include "actors/config/job_schema.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::actors {
inline namespace config {
namespace detail {

/// The field list of a section read into a `Spec`.
template <class Spec>
class section_fields {
public:
  /// Reads `value`, the field of its key; `section` is there for the fields
  /// that check a sibling (give one key or its older name, not both).
  using reader = void (*)(const field& value, const field& section, Spec& spec);
  /// What is checked across the section's keys once they are read (a key
  /// one kind needs, a bound that depends on two): runs on every section,
  /// an absent one too.
  using rule = void (*)(const field& section, Spec& spec);

  struct entry {
    const char* key;
    reader read;
    /// Absent, the section fails naming it (field::require); else an absent
    /// key keeps its default.
    bool required = false;
  };

  section_fields(std::initializer_list<entry> entries, rule after = nullptr)
      : entries_(entries), after_(after) {}

  /// Its keys, in the order they are read (and listed in key errors).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const entry& e : entries_)
      out.emplace_back(e.key);
    return out;
  }

  /// Checks that `section` holds only known keys, none twice (check_section:
  /// these and those jobs add at its path), then reads each key it has in
  /// the list's order, then the rule.
  void read(const field& section, Spec& spec) const {
    check_section(section);
    for (const entry& e : entries_) {
      if (e.required)
        e.read(section.require(e.key), section, spec);
      else if (auto value = section.get(e.key))
        e.read(*value, section, spec);
    }
    if (after_ != nullptr)
      after_(section, spec);
  }

private:
  std::vector<entry> entries_;
  rule after_;
};

} // namespace detail
} // namespace config
} // namespace baton::actors
