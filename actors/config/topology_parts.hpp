#pragma once

// The parts of the topology reader, one job each, put together by
// topology.cpp (build_topology, parse_document): the key schema that
// validation and `--set` share (topology_schema.cpp), the checked readers
// the modes use too (checked_readers.cpp, declared in job_schema.hpp), the
// data section (data_reader.cpp), the workload's others (workload_reader.cpp),
// the cluster's (cluster_reader.cpp: nodes, runtime, faults) and the `--set`
// overrides (overrides.cpp). Each common section is read by its field list
// (section_fields.hpp).
// Internal to actors/config.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "actors/config/job_schema.hpp"
#include "actors/config/topology.hpp"
#include "actors/config/yaml_codec.hpp"
#include "actors/config/yaml_field.hpp"

namespace baton::model {
struct data_header;
} // namespace baton::model

namespace baton::actors {
inline namespace config {
namespace detail {

// -- the key schema (topology_schema.cpp) ------------------------------------------

/// The keys of each common map section by path pattern ("*": a list index).
const std::map<std::string, std::vector<std::string>>& section_keys();
/// Those of the data section, of the workload's others and of the cluster's,
/// from their field lists (data_reader.cpp, workload_reader.cpp,
/// cluster_reader.cpp).
std::map<std::string, std::vector<std::string>> data_section_keys();
std::map<std::string, std::vector<std::string>> workload_section_keys();
std::map<std::string, std::vector<std::string>> cluster_section_keys();
/// The keys of the map at `pattern`, the common sections' and every job's;
/// nullopt for a path that is not a map of the schema.
std::optional<std::vector<std::string>> keys_of(const std::string& pattern,
                                                const source_info& source);
/// Whether the value at `pattern` is a list (`--set` addresses its entries).
bool is_list(const std::string& pattern, const source_info& source);
std::optional<size_t> parse_index(const std::string& text);
/// "tasks.2.labels" -> "tasks.*.labels": the schema entry of a path.
std::string pattern_of(const std::string& path);
/// "at the top level" / "in 'runtime'", for key errors.
std::string in_section(const std::string& path);
/// "; did you mean 'epochs'?" after a key error, or "".
std::string hint(const std::string& suggestion);

// -- the data (data_reader.cpp) ----------------------------------------------------

/// The data section read into `t` and checked against its data set's
/// header (read from disk): its normalisation and augmentation, the
/// samples' shape; returned, what the other sections need of the header.
struct data_reading {
  int64_t classes = 0;               ///< the data set's (the tasks' labels)
  std::optional<job_length> length;  ///< the job's length where the data gives it
};
data_reading read_data(const field& data, topology& t);

// -- the workload (workload_reader.cpp) --------------------------------------------

/// What the job's own section and the checks after it need of the workload.
struct workload_reading {
  std::vector<std::string> layers;  ///< the backbone's layer names
  std::optional<job_length> length; ///< the job's length where the data gives it
};
/// The workload around the job's own section, into `t` (whose job is
/// chosen): the seed, the data (read_data), the tasks, `optimizer`, the
/// backbone, the trained task, the target accuracy and the epoch selection.
workload_reading read_workload(const field& root, topology& t);

// -- the cluster (cluster_reader.cpp) ----------------------------------------------

/// `nodes`, `runtime` and `faults`, into `t` (the faults' steps are checked
/// against the job's length once it is known: topology.cpp).
void read_cluster(const field& root, topology& t);

// -- `--set` (overrides.cpp) -------------------------------------------------------

/// Applies one "a.b.c=value" to the document; the paths it touches remember
/// the override, so that errors in its value name it instead of a line.
void apply_override(YAML::Node& doc, const std::string& text, source_info& source);

} // namespace detail
} // namespace config
} // namespace baton::actors
