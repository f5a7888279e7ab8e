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

void parse_data(const field& data, topology& t);
model::data_header check_dataset(const field& data, const topology& t, bool& known);
void check_normalize(const field& data, const topology& t, const model::data_header& h);
void check_augment(const field& data, const topology& t, const model::data_header& h);
std::optional<job_length> length_of(const model::data_header& data, bool known,
                                    const topology& t);
void set_sample_shape(const model::data_header& h, topology& t);

// -- the workload's other sections (workload_reader.cpp) ---------------------------

void parse_job(const field& root, const std::vector<job_schema>& jobs, topology& t);
std::vector<model::task> parse_tasks(const field& list, int64_t classes,
                                     const std::string& dataset);
std::vector<std::string> parse_backbone(const field& section, topology& t);
void parse_trained_task(const field& root, topology& t);
void parse_target_accuracy(const field& root, topology& t);
void parse_selection(const field& root, topology& t);

// -- the cluster (cluster_reader.cpp) ----------------------------------------------

std::vector<node_address> parse_nodes(const field& list);
void parse_runtime(const field& section, runtime_spec& r);
std::vector<fault_spec> parse_faults(const field& list, const std::optional<job_length>& length);

// -- `--set` (overrides.cpp) -------------------------------------------------------

/// Applies one "a.b.c=value" to the document; the paths it touches remember
/// the override, so that errors in its value name it instead of a line.
void apply_override(YAML::Node& doc, const std::string& text, source_info& source);

} // namespace detail
} // namespace config
} // namespace baton::actors
